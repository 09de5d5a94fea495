"""Syntax check for standard 5-field cron schedules, as robfig/cron ``ParseStandard`` (used by
KubeRay's ValidateRayCronJobSpec) accepts them. Only validates; computing fire times is the
RayCronJob controller's business."""

from __future__ import annotations

from raybus.api.k8s_names import parse_go_duration_seconds

_MONTHS = {m: i + 1 for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_DOWS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# (min, max, names) for minute, hour, day-of-month, month, day-of-week.
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 6, _DOWS),
)
_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})


def _number(text: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise ValueError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def _check_range(expr: str, low: int, high: int, names: dict[str, int]) -> None:
    range_and_step = expr.split("/")
    if len(range_and_step) > 2:
        raise ValueError(f"too many slashes: {expr}")
    bounds = range_and_step[0].split("-")
    if len(bounds) > 2:
        raise ValueError(f"too many hyphens: {expr}")
    if bounds[0] in ("*", "?"):
        start, end = low, high
    else:
        start = _number(bounds[0], names)
        end = _number(bounds[1], names) if len(bounds) == 2 else start
    if len(range_and_step) == 2:
        step = _number(range_and_step[1], {})
        if step <= 0:
            raise ValueError(f"step of range should be a positive number: {expr}")
        if len(bounds) == 1 and bounds[0] not in ("*", "?"):
            end = high  # "N/step" means N-max/step
    if start < low:
        raise ValueError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise ValueError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")


def validate_cron_schedule(schedule: str) -> str | None:
    """None when robfig's ParseStandard would accept ``schedule``, else its error text."""
    spec = schedule.strip()
    if not spec:
        return "empty spec string"
    if spec.startswith("@"):
        if spec.startswith("@every "):
            try:
                parse_go_duration_seconds(spec[len("@every "):].strip())
            except ValueError as exc:
                return f"failed to parse duration {spec}: {exc}"
            return None
        return None if spec in _DESCRIPTORS else f"unrecognized descriptor: {spec}"
    fields = spec.split()
    if len(fields) != len(_FIELDS):
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    try:
        for field, (low, high, names) in zip(fields, _FIELDS, strict=True):
            for expr in field.split(","):
                _check_range(expr, low, high, names)
    except ValueError as exc:
        return str(exc)
    return None
