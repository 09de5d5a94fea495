"""RayService status arithmetic: conditions, the initializing timeout, InconsistentRayServiceStatuses.

Statuses are camelCase dicts (what the API server stores); functions here mutate a working copy the
way KubeRay mutates ``rayServiceInstance.Status`` during one reconcile.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from raybus.api.k8s_names import parse_go_duration_seconds
from raybus.decisions.rayservice import constants as c

Json = dict[str, Any]
_ATOI = re.compile(r"[+-]?[0-9]+")


def rfc3339(now: datetime) -> str:
    """metav1.Time's JSON form (second precision, UTC)."""
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def find_condition(status: Json, type_: str) -> Json | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def is_condition_true(status: Json, type_: str) -> bool:
    cond = find_condition(status, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(status: Json, type_: str, cond_status: str, reason: str, message: str, *,
                  now: datetime) -> None:
    """KubeRay's setCondition: meta.SetStatusCondition with ObservedGeneration taken from
    ``status.observedGeneration``; lastTransitionTime moves only when the status flips."""
    new = {"type": type_, "status": cond_status, "reason": reason, "message": message}
    generation = status.get("observedGeneration")
    if generation:
        new["observedGeneration"] = generation
    conditions: list[Json] = [dict(x) for x in status.get("conditions") or [] if isinstance(x, dict)]
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != cond_status:
                cond["lastTransitionTime"] = rfc3339(now)
            cond.update(new)
            if "observedGeneration" not in new:
                cond.pop("observedGeneration", None)
            break
    else:
        conditions.append({**new, "lastTransitionTime": rfc3339(now)})
    status["conditions"] = conditions


def remove_condition(status: Json, type_: str) -> None:
    """meta.RemoveStatusCondition."""
    status["conditions"] = [x for x in status.get("conditions") or []
                            if isinstance(x, dict) and x.get("type") != type_]


# --- InconsistentRayServiceStatuses (utils/consistency.go) -------------------------------------------
def _apps(block: Json) -> dict[str, Json]:
    apps = block.get("applicationStatuses") or {}
    return apps if isinstance(apps, dict) else {}


def _inconsistent_block(old: Json, new: Json) -> bool:
    if (old.get("rayClusterName") or "") != (new.get("rayClusterName") or ""):
        return True
    # raybus addition: KubeRay v1.7's check predates the incremental upgrade; without these a
    # target_capacity / traffic step that changes nothing else would never be persisted.
    for key in ("targetCapacity", "trafficRoutedPercent"):
        if old.get(key) != new.get(key):
            return True
    old_apps, new_apps = _apps(old), _apps(new)
    if len(old_apps) != len(new_apps):
        return True
    for name, new_app in new_apps.items():
        old_app = old_apps.get(name)
        if old_app is None:
            return True
        if (old_app.get("status") or "") != (new_app.get("status") or "") or \
                (old_app.get("message") or "") != (new_app.get("message") or ""):
            return True
        old_deps = old_app.get("serveDeploymentStatuses") or {}
        new_deps = new_app.get("serveDeploymentStatuses") or {}
        if len(old_deps) != len(new_deps):
            return True
        for dep_name, new_dep in new_deps.items():
            old_dep = old_deps.get(dep_name)
            if old_dep is None or (old_dep.get("status") or "") != (new_dep.get("status") or "") or \
                    (old_dep.get("message") or "") != (new_dep.get("message") or ""):
                return True
    return False


def _norm_conditions(status: Json) -> list[Json]:
    return [{k: v for k, v in cond.items() if v is not None and v != ""}
            for cond in status.get("conditions") or [] if isinstance(cond, dict)]


def inconsistent_statuses(old: Json, new: Json) -> bool:
    """True when the status must be written. lastUpdateTime, observedGeneration and the embedded
    rayClusterStatus are ignored, exactly as KubeRay ignores them."""
    if (old.get("serviceStatus") or "") != (new.get("serviceStatus") or ""):
        return True
    if (old.get("numServeEndpoints") or 0) != (new.get("numServeEndpoints") or 0):
        return True
    if _norm_conditions(old) != _norm_conditions(new):
        return True
    return any(_inconsistent_block(old.get(key) or {}, new.get(key) or {})
               for key in ("activeServiceStatus", "pendingServiceStatus"))


# --- initializing timeout (getInitializingTimeout / isInitializingTimeout / markFailed...) -----------
def initializing_timeout_seconds(annotations: dict[str, str] | None) -> float | None:
    """``ray.io/initializing-timeout``: a Go duration first, then integer seconds; None if absent."""
    value = (annotations or {}).get(c.INITIALIZING_TIMEOUT_ANNOTATION, "")
    if not value:
        return None
    try:
        return parse_go_duration_seconds(value)
    except ValueError:
        pass
    if _ATOI.fullmatch(value):
        return float(int(value))
    return None  # validation rejects it before we get here


def is_initializing_timeout(status: Json) -> bool:
    """Terminal: Ready=False with reason InitializingTimeout, whatever the generation."""
    cond = find_condition(status, c.READY)
    return cond is not None and cond.get("status") == "False" and cond.get("reason") == c.INITIALIZING_TIMEOUT


def initializing_deadline(status: Json, annotations: dict[str, str] | None) -> datetime | None:
    """When markFailedOnInitializingTimeout would fire (Ready=False/Initializing since LTT)."""
    timeout = initializing_timeout_seconds(annotations)
    cond = find_condition(status, c.READY)
    if timeout is None or cond is None or cond.get("status") != "False" or cond.get("reason") != c.INITIALIZING:
        return None
    since = parse_time(cond.get("lastTransitionTime"))
    if since is None:
        return None
    return since + timedelta(seconds=timeout)


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` (e.g. 1h0m0s, 5m0.25s, 1.5ms)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)

    def frac(value: int, div: int) -> str:
        whole, rest = divmod(value, div)
        digits = str(rest).rjust(len(str(div)) - 1, "0").rstrip("0")
        return f"{whole}.{digits}" if digits else str(whole)

    if u < 1_000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{frac(u, 1_000)}µs"
    if u < 1_000_000_000:
        return f"{sign}{frac(u, 1_000_000)}ms"
    hours, rem = divmod(u, 3600 * 10**9)
    minutes, rem = divmod(rem, 60 * 10**9)
    out = f"{frac(rem, 10**9)}s"
    if hours or minutes:
        out = f"{minutes}m{out}"
    if hours:
        out = f"{hours}h{out}"
    return sign + out


def mark_failed_on_initializing_timeout(status: Json, annotations: dict[str, str] | None, *,
                                        now: datetime) -> str | None:
    """markFailedOnInitializingTimeout: returns the Warning event message when it fires.

    Clears both cluster names (everything becomes dangling and is cleaned up with the usual delay)
    and sets Ready=False/InitializingTimeout, a terminal state."""
    deadline = initializing_deadline(status, annotations)
    timeout = initializing_timeout_seconds(annotations)
    if deadline is None or timeout is None or now < deadline:
        return None
    cond = find_condition(status, c.READY) or {}
    since = parse_time(cond.get("lastTransitionTime")) or now
    spent = go_duration((now - since).total_seconds())
    configured = go_duration(timeout)
    for key in ("activeServiceStatus", "pendingServiceStatus"):
        block = dict(status.get(key) or {})
        block.pop("rayClusterName", None)
        status[key] = block
    set_condition(status, c.READY, "False", c.INITIALIZING_TIMEOUT,
                  f"RayService failed to become ready within the configured timeout of {configured}. "
                  f"Time spent initializing: {spent}", now=now)
    return f"RayService initializing timeout exceeded after {spent} (configured timeout: {configured})"


# --- calculateConditions -------------------------------------------------------------------------------
def calculate_conditions(status: Json, annotations: dict[str, str] | None, *, now: datetime) -> str | None:
    """calculateConditions; returns the InitializingTimeout Warning message when it fired."""
    event: str | None = None
    if not status.get("conditions"):
        set_condition(status, c.READY, "False", c.INITIALIZING, c.MSG_INITIALIZING, now=now)
        set_condition(status, c.UPGRADE_IN_PROGRESS, "False", c.INITIALIZING, c.MSG_INITIALIZING, now=now)
    if (status.get("numServeEndpoints") or 0) > 0:
        set_condition(status, c.READY, "True", c.NON_ZERO_SERVE_ENDPOINTS, c.MSG_NON_ZERO, now=now)
    elif is_condition_true(status, c.READY):
        set_condition(status, c.READY, "False", c.ZERO_SERVE_ENDPOINTS, c.MSG_ZERO, now=now)
    else:
        # After the endpoint check: endpoints that appear in time win over the timeout.
        event = mark_failed_on_initializing_timeout(status, annotations, now=now)
    active = (status.get("activeServiceStatus") or {}).get("rayClusterName") or ""
    pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
    if active and pending:
        set_condition(status, c.UPGRADE_IN_PROGRESS, "True", c.BOTH_ACTIVE_PENDING_CLUSTERS_EXIST, c.MSG_BOTH, now=now)
    elif active:
        set_condition(status, c.UPGRADE_IN_PROGRESS, "False", c.NO_PENDING_CLUSTER, c.MSG_NO_PENDING, now=now)
    else:
        cond = find_condition(status, c.UPGRADE_IN_PROGRESS)
        # Don't override the condition while initializing or after the initializing timeout.
        if cond is None or cond.get("reason") not in (c.INITIALIZING, c.INITIALIZING_TIMEOUT):
            set_condition(status, c.UPGRADE_IN_PROGRESS, "Unknown", c.NO_ACTIVE_CLUSTER, c.MSG_NO_ACTIVE, now=now)
    return event
