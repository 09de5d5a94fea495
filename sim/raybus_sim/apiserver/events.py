"""events.k8s.io/v1 <-> core/v1 Event conversion: upstream both are views of one stored resource."""

from __future__ import annotations

from typing import Any

from .resources import ResourceType

# events.k8s.io/v1 field -> core/v1 field (the rest share names: reason, type, action, eventTime, series,
# related, reportingInstance, metadata)
_NEW_TO_CORE = {"regarding": "involvedObject", "note": "message", "reportingController": "reportingComponent",
                "deprecatedSource": "source", "deprecatedFirstTimestamp": "firstTimestamp",
                "deprecatedLastTimestamp": "lastTimestamp", "deprecatedCount": "count"}
_CORE_TO_NEW = {v: k for k, v in _NEW_TO_CORE.items()}


def is_converted(rt: ResourceType) -> bool:
    return rt.group == "events.k8s.io"


def to_storage(rt: ResourceType, obj: Any) -> Any:
    if not is_converted(rt) or not isinstance(obj, dict):
        return obj
    out = {_NEW_TO_CORE.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


def from_storage(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    if not is_converted(rt):
        return obj
    out = {_CORE_TO_NEW.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = rt.api_version, rt.kind
    return out
