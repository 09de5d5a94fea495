"""Events: events.k8s.io/v1 <-> core/v1 conversion (upstream both are views of one stored resource),
Go's zero-value serialization of both, and ValidateEventCreate."""

from __future__ import annotations

from typing import Any

from .resources import ResourceType
from .validation_names import dns1123_subdomain_errors, qualified_name_errors

Cause = tuple[str, str, str]
# events.k8s.io/v1 field -> core/v1 field (the rest share names: reason, type, action, eventTime, series,
# related, reportingInstance, metadata)
_NEW_TO_CORE = {"regarding": "involvedObject", "note": "message", "reportingController": "reportingComponent",
                "deprecatedSource": "source", "deprecatedFirstTimestamp": "firstTimestamp",
                "deprecatedLastTimestamp": "lastTimestamp", "deprecatedCount": "count"}
_CORE_TO_NEW = {v: k for k, v in _NEW_TO_CORE.items()}
# core/v1 Event fields Go always serializes (no omitempty, or structs): their zero values
_CORE_ZERO = (("source", dict), ("firstTimestamp", None), ("lastTimestamp", None), ("eventTime", None),
              ("reportingComponent", ""), ("reportingInstance", ""))
# events.k8s.io/v1 fields with omitempty
_NEW_OMITEMPTY = ("reportingController", "reportingInstance", "action", "reason", "note", "type", "deprecatedCount")


def is_converted(rt: ResourceType) -> bool:
    return rt.group == "events.k8s.io"


def to_storage(rt: ResourceType, obj: Any) -> Any:
    if rt.gr != "events" or not isinstance(obj, dict):
        return obj
    out = {_NEW_TO_CORE.get(k, k): v for k, v in obj.items()} if is_converted(rt) else dict(obj)
    out["apiVersion"], out["kind"] = "v1", "Event"
    for key, zero in _CORE_ZERO:
        if out.get(key) is None:
            out[key] = zero() if callable(zero) else zero
    if not out.get("count"):
        out.pop("count", None)
    return out


def from_storage(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    if not is_converted(rt):
        return obj
    out = {_CORE_TO_NEW.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = rt.api_version, rt.kind
    for key in _NEW_OMITEMPTY:
        if key in out and not out[key]:
            del out[key]
    out.setdefault("eventTime", None)
    return out


def event_causes(ev: dict[str, Any], *, new_api: bool) -> list[Cause]:
    """ValidateEventCreate for a core-shaped Event; new_api: sent to events.k8s.io/v1 (strict rules)."""
    causes: list[Cause] = []
    ns = (ev.get("metadata") or {}).get("namespace") or ""
    involved_ns = (ev.get("involvedObject") or {}).get("namespace") or ""
    mismatch = ("FieldValueInvalid", "involvedObject.namespace", (f'Invalid value: "{involved_ns}": does not match '
                "event.namespace"))
    controller_field = "reportingController" if new_api else "reportingComponent"
    if not ev.get("eventTime"):
        if (not involved_ns and ns not in ("", "default")) or (involved_ns and ns != involved_ns):
            causes.append(mismatch)
    else:
        if not involved_ns and ns not in ("default", "kube-system"):
            causes.append(mismatch)
        controller = ev.get("reportingComponent") or ""
        if not controller:
            causes.append(("FieldValueRequired", controller_field, "Required value"))
        causes += [("FieldValueInvalid", controller_field, f'Invalid value: "{controller}": {e}')
                   for e in qualified_name_errors(controller)]
        instance = ev.get("reportingInstance") or ""
        if not instance:
            causes.append(("FieldValueRequired", "reportingInstance", "Required value"))
        elif len(instance) > 128:
            causes.append(("FieldValueInvalid", "reportingInstance", ('Invalid value: "": can have at most 128 '
                           "characters")))
        for name, limit in (("action", 128), ("reason", 128)):
            if not ev.get(name):
                causes.append(("FieldValueRequired", name, "Required value"))
            elif len(ev[name]) > limit:
                causes.append(("FieldValueInvalid", name, f'Invalid value: "": can have at most {limit} characters'))
        if len(ev.get("message") or "") > 1024:
            causes.append(("FieldValueInvalid", "message", 'Invalid value: "": can have at most 1024 characters'))
    causes += [("FieldValueInvalid", "namespace", f'Invalid value: "{ns}": {e}') for e in dns1123_subdomain_errors(ns)]
    if not new_api:
        return causes
    if not ev.get("eventTime"):
        causes.append(("FieldValueRequired", "eventTime", "Required value"))
    if ev.get("type") not in ("Normal", "Warning"):
        causes.append(("FieldValueInvalid", "type", f'Invalid value: "": has invalid value: {ev.get("type") or ""}'))
    for key, new_name in (("firstTimestamp", "firstTimestamp"), ("lastTimestamp", "lastTimestamp"),
                          ("count", "count")):
        if ev.get(key):
            causes.append(("FieldValueInvalid", new_name, 'Invalid value: "": needs to be unset'))
    if (ev.get("source") or {}).get("component") or (ev.get("source") or {}).get("host"):
        causes.append(("FieldValueInvalid", "source", 'Invalid value: "": needs to be unset'))
    series = ev.get("series")
    if series is not None:
        if (series.get("count") or 0) < 2:
            causes.append(("FieldValueInvalid", "series.count", 'Invalid value: "": should be at least 2'))
        if not series.get("lastObservedTime"):
            causes.append(("FieldValueRequired", "series.lastObservedTime", "Required value"))
    return causes
