"""Pure re-implementations of the k8s.io/apimachinery validation helpers KubeRay calls.

Each ``is_*`` returns the list of apimachinery error strings (empty = valid) with apimachinery's
wording, so messages we build around them read exactly like KubeRay's. Also: Go-style
``version.ParseGeneric`` and ``time.ParseDuration`` used by ValidateRayClusterSpec and
validateInitializingTimeout.
"""

from __future__ import annotations

import re

DNS1035_LABEL_MAX = 63
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1035_RE = re.compile(_DNS1035_FMT)
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # apimachinery's RegexError: examples are joined with ",  " (two spaces) - reproduced verbatim.
    out = msg
    if examples:
        out += " (e.g. " + ",  or ".join(f"'{e}'" for e in examples) + ", "
    else:
        out += " ("
    return out + f"regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def go_list(items: list[str]) -> str:
    """Go's ``fmt.Sprintf("%v", []string{...})``."""
    return "[" + " ".join(items) + "]"


def is_dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1035_LABEL_MAX:
        errs.append(_max_len_error(DNS1035_LABEL_MAX))
    if not _DNS1035_RE.fullmatch(value):
        errs.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character",
                _DNS1035_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errs


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                "must start and end with an alphanumeric character",
                _DNS1123_LABEL_FMT,
                "my-name",
                "123-abc",
            )
        )
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                "'.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


def is_qualified_name(value: str) -> list[str]:
    """A label/annotation key: optional DNS-1123 subdomain prefix + "/" + name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + e for e in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character",
                _QUALIFIED_NAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len_error(QUALIFIED_NAME_MAX))
    if name and not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(
            "name part "
            + _regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character",
                _QUALIFIED_NAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(_max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


_GENERIC_VERSION_RE = re.compile(r"^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)$", re.DOTALL)


def parse_generic_version(value: str) -> tuple[int, ...]:
    """k8s ``version.ParseGeneric``: ``[v]X.Y[.Z...]`` with any suffix ignored; ValueError otherwise."""
    match = _GENERIC_VERSION_RE.match(value)
    if match is None:
        raise ValueError(f'could not parse "{value}" as version')
    components = match.group(1).split(".")
    if len(components) < 2:
        raise ValueError(f'illegal version string "{value}"')
    out: list[int] = []
    for comp in components:
        # Go rejects leading zeros ("01") in version components.
        if len(comp) > 1 and comp.startswith("0"):
            raise ValueError(f'illegal zero-prefixed version component "{comp}" in "{value}"')
        out.append(int(comp))
    # Go compares component-wise with missing trailing components treated as 0.
    while len(out) < 3:
        out.append(0)
    return tuple(out)


_DURATION_UNITS_NS: dict[str, float] = {
    "ns": 1.0,
    "us": 1e3,
    "µs": 1e3,  # U+00B5 micro sign
    "μs": 1e3,  # U+03BC Greek mu
    "ms": 1e6,
    "s": 1e9,
    "m": 60e9,
    "h": 3600e9,
}
_DURATION_PART_RE = re.compile(r"([0-9]*(?:\.[0-9]*)?)([a-zµμ]+)")


def parse_go_duration_seconds(value: str) -> float:
    """Go ``time.ParseDuration`` -> seconds; ValueError on anything Go would reject."""
    s = value
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f'time: invalid duration "{value}"')
    total_ns = 0.0
    pos = 0
    while pos < len(s):
        match = _DURATION_PART_RE.match(s, pos)
        if match is None or match.group(1) in ("", "."):
            if s[pos:].replace(".", "").isdigit():
                raise ValueError(f'time: missing unit in duration "{value}"')
            raise ValueError(f'time: invalid duration "{value}"')
        number, unit = match.groups()
        if unit not in _DURATION_UNITS_NS:
            raise ValueError(f'time: unknown unit "{unit}" in duration "{value}"')
        total_ns += float(number) * _DURATION_UNITS_NS[unit]
        pos = match.end()
    return sign * total_ns / 1e9
