"""Pod spec validation and warnings (pkg/apis/core/validation ValidatePodSpec, warnings.go), the parts an
operator's pod templates can trip over: containers, ports, env, volumes and mounts, resources,
restartPolicy; plus the pods/resize rules. Runs after defaulting, as upstream (requests copied from
limits are validated too)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .quantity import amount, canonical
from .validation_names import LABEL_MSG, dns1123_label_errors, port_name_errors

Cause = tuple[str, str, str]
_RESTART = ("Always", "OnFailure", "Never")
_DNS_POLICY = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_PRINTABLE_NO_EQ = re.compile(r"^[\x20-\x3c\x3e-\x7e]+$")


def _port_num_errors(value: Any) -> list[str]:
    return [] if isinstance(value, int) and 1 <= value <= 65535 else ["must be between 1 and 65535, inclusive"]


def _native(resource: str) -> bool:
    # IsNativeResource: no domain, or a kubernetes.io domain; extended resources cannot overcommit.
    return "/" not in resource or "kubernetes.io/" in resource


def _overcommit_allowed(resource: str) -> bool:
    return _native(resource) and not resource.startswith("hugepages-")


def resource_causes(res: Any, path: str) -> list[Cause]:
    """ValidateResourceRequirements: non-negative quantities, requests <= limits (== for extended)."""
    if not isinstance(res, dict):
        return []
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    if not isinstance(limits, dict) or not isinstance(requests, dict):
        return []  # a decode error upstream; already refused for client requests
    key = (tuple(limits.items()), tuple(requests.items()))
    try:  # the same few resource blocks repeat across thousands of pods
        found = _resource_causes(key)
    except TypeError:  # unhashable quantities (refused by decoding): check uncached
        found = _resource_causes.__wrapped__(key)
    return [(r, path + f, m) for r, f, m in found]


@lru_cache(maxsize=1024)
def _resource_causes(key: tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...]]) -> list[Cause]:
    path = ""  # causes carry the suffix after the resources path
    causes: list[Cause] = []
    limits, requests = dict(key[0]), dict(key[1])
    for kind, values in (("limits", limits), ("requests", requests)):
        for name, q in values.items():
            if amount(q) < 0:
                causes.append(("FieldValueInvalid", f"{path}.{kind}[{name}]",
                               f'Invalid value: "{canonical(q)}": must be greater than or equal to 0'))
            elif not _native(name) and amount(q).denominator != 1:
                causes.append(("FieldValueInvalid", f"{path}.{kind}[{name}]",
                               f'Invalid value: "{canonical(q)}": must be an integer'))
    for name, q in requests.items():
        if name in limits:
            limit = limits[name]
            if amount(q) != amount(limit) and not _overcommit_allowed(name):
                causes.append(("FieldValueInvalid", f"{path}.requests", (f'Invalid value: "{canonical(q)}": must '
                               f"be equal to {name} limit of {canonical(limit)}")))
            elif amount(q) > amount(limit):
                causes.append(("FieldValueInvalid", f"{path}.requests", (f'Invalid value: "{canonical(q)}": must '
                               f"be less than or equal to {name} limit of {canonical(limit)}")))
        elif not _overcommit_allowed(name):
            causes.append(("FieldValueRequired", f"{path}.limits",
                           "Required value: Limit must be set for non overcommitable resources"))
    return causes


def _container_causes(c: dict[str, Any], path: str, volumes: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    if not c.get("image"):
        causes.append(("FieldValueRequired", f"{path}.image", "Required value"))
    names: set[str] = set()
    for j, p in enumerate(c.get("ports") or []):
        ppath = f"{path}.ports[{j}]"
        pname = p.get("name")
        if pname:
            errs = port_name_errors(pname)
            causes += [("FieldValueInvalid", f"{ppath}.name", f'Invalid value: "{pname}": {e}') for e in errs]
            if not errs and pname in names:
                causes.append(("FieldValueDuplicate", f"{ppath}.name", f'Duplicate value: "{pname}"'))
            names.add(pname)
        if not p.get("containerPort"):
            causes.append(("FieldValueRequired", f"{ppath}.containerPort", "Required value"))
        else:
            causes += [("FieldValueInvalid", f"{ppath}.containerPort", f"Invalid value: {p['containerPort']}: {e}")
                       for e in _port_num_errors(p["containerPort"])]
        if p.get("hostPort"):
            causes += [("FieldValueInvalid", f"{ppath}.hostPort", f"Invalid value: {p['hostPort']}: {e}")
                       for e in _port_num_errors(p["hostPort"])]
        if p.get("protocol") not in _PROTOCOLS:
            causes.append(("FieldValueNotSupported", f"{ppath}.protocol", (f'Unsupported value: "{p.get("protocol")}": '
                           f'supported values: "SCTP", "TCP", "UDP"')))
    for j, env in enumerate(c.get("env") or []):
        name = env.get("name") or ""
        if not name:
            causes.append(("FieldValueRequired", f"{path}.env[{j}].name", "Required value"))
        elif not _PRINTABLE_NO_EQ.match(name):  # 1.33 RelaxedEnvironmentVariableValidation
            causes.append(("FieldValueInvalid", f"{path}.env[{j}].name", (f'Invalid value: "{name}": a valid '
                           f"environment variable name must consist only of printable ASCII characters other than '='")))
    mounts: set[str] = set()
    for j, m in enumerate(c.get("volumeMounts") or []):
        mpath = f"{path}.volumeMounts[{j}]"
        if not m.get("name"):
            causes.append(("FieldValueRequired", f"{mpath}.name", "Required value"))
        elif m["name"] not in volumes:
            causes.append(("FieldValueNotFound", f"{mpath}.name", f'Not found: "{m["name"]}"'))
        if not m.get("mountPath"):
            causes.append(("FieldValueRequired", f"{mpath}.mountPath", "Required value"))
        elif m["mountPath"] in mounts:
            causes.append(("FieldValueInvalid", f"{mpath}.mountPath", (f'Invalid value: "{m["mountPath"]}": must be '
                           f"unique")))
        mounts.add(m.get("mountPath") or "")
    return causes + resource_causes(c.get("resources"), f"{path}.resources")


def pod_spec_causes(spec: Any, prefix: str, *, restart_policies: tuple[str, ...] = _RESTART) -> list[Cause]:
    if not isinstance(spec, dict):
        return [("FieldValueRequired", prefix, "Required value")]
    causes: list[Cause] = []
    volumes: set[str] = set()
    for i, vol in enumerate(spec.get("volumes") or []):
        vname = vol.get("name") or ""
        if not vname:
            causes.append(("FieldValueRequired", f"{prefix}.volumes[{i}].name", "Required value"))
        elif dns1123_label_errors(vname):
            causes.append(("FieldValueInvalid", f"{prefix}.volumes[{i}].name", f'Invalid value: "{vname}": {LABEL_MSG}'))
        elif vname in volumes:
            causes.append(("FieldValueDuplicate", f"{prefix}.volumes[{i}].name", f'Duplicate value: "{vname}"'))
        volumes.add(vname)
    if not spec.get("containers"):
        causes.append(("FieldValueRequired", f"{prefix}.containers", "Required value"))
    seen: set[str] = set()
    host_ports: set[str] = set()
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(kind) or []):
            path = f"{prefix}.{kind}[{i}]"
            name = c.get("name") or ""
            if not name:
                causes.append(("FieldValueRequired", f"{path}.name", "Required value"))
            elif dns1123_label_errors(name):
                causes += [("FieldValueInvalid", f"{path}.name", f'Invalid value: "{name}": {e}')
                           for e in dns1123_label_errors(name)]
            elif name in seen:
                causes.append(("FieldValueDuplicate", f"{path}.name", f'Duplicate value: "{name}"'))
            seen.add(name)
            causes += _container_causes(c, path, volumes)
            for j, p in enumerate(c.get("ports") or []):  # AccumulateUniqueHostPorts, across containers
                if p.get("hostPort"):
                    key = f"{p.get('protocol', 'TCP')}/{p.get('hostIP', '')}/{p['hostPort']}"
                    if key in host_ports:
                        causes.append(("FieldValueDuplicate", f"{path}.ports[{j}].hostPort", f'Duplicate value: "{key}"'))
                    host_ports.add(key)
    if spec.get("restartPolicy") not in restart_policies:
        supported = ", ".join(f'"{p}"' for p in restart_policies)
        causes.append(("FieldValueNotSupported", f"{prefix}.restartPolicy", (f'Unsupported value: '
                       f'"{spec.get("restartPolicy")}": supported values: {supported}')))
    if spec.get("dnsPolicy") not in _DNS_POLICY:
        causes.append(("FieldValueNotSupported", f"{prefix}.dnsPolicy", (f'Unsupported value: "{spec.get("dnsPolicy")}": '
                       f'supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"')))
    causes += resource_causes(spec.get("resources"), f"{prefix}.resources")
    return causes


def pod_warnings(obj: dict[str, Any], prefix: str = "spec") -> list[str]:
    """warningsForPod: a name that is not a DNS label; duplicate/overlapping container ports."""
    out: list[str] = []
    name = (obj.get("metadata") or {}).get("name") or ""
    label_errs = dns1123_label_errors(name)
    if name and label_errs:
        out.append("metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; "
                   f"a DNS label is recommended: [{', '.join(label_errs)}]")
    seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for i, c in enumerate((obj.get("spec") or {}).get("containers") or []):
        for j, p in enumerate(c.get("ports") or []):
            here = f"{prefix}.containers[{i}].ports[{j}]"
            key = f"{p.get('protocol', 'TCP')}/{p.get('containerPort')}"
            for other_path, other in seen.get(key, []):
                if p.get("hostIP", "") == other.get("hostIP", "") and p.get("hostPort", 0) == other.get("hostPort", 0):
                    out.append(f"{here}: duplicate port definition with {other_path}")
                elif not p.get("hostPort") or not other.get("hostPort"):
                    out.append(f"{here}: overlapping port definition with {other_path}")
            seen.setdefault(key, []).append((here, p))
    return out


def _other_resources(spec: dict[str, Any]) -> list[Any]:
    return [{kind: {k: v for k, v in ((c.get("resources") or {}).get(kind) or {}).items() if k not in ("cpu", "memory")}
             for kind in ("limits", "requests")} for c in spec.get("containers") or []]


def resize_causes(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """ValidatePodResize: the QoS class may not change; only cpu and memory are resizable."""
    from .defaults import qos_class  # defaults imports the validators' helpers

    causes: list[Cause] = []
    old_qos = (old.get("status") or {}).get("qosClass") or qos_class(old.get("spec") or {})
    if qos_class(new.get("spec") or {}) != old_qos:
        causes.append(("FieldValueInvalid", "spec", (f'Invalid value: "{old_qos}": Pod QOS Class may not change as a '
                       f"result of resizing")))
    if _other_resources(new.get("spec") or {}) != _other_resources(old.get("spec") or {}):
        causes.append(("FieldValueForbidden", "spec", "Forbidden: only cpu and memory resources are mutable"))
    for i, c in enumerate((new.get("spec") or {}).get("containers") or []):
        causes += resource_causes(c.get("resources"), f"spec.containers[{i}].resources")
    return causes


def resized(old: dict[str, Any], patched: dict[str, Any]) -> dict[str, Any]:
    """ResizeStrategy.PrepareForUpdate: only containers' resources and resizePolicy are taken from the
    request; every other change is dropped."""
    spec = dict(old.get("spec") or {})
    wanted = {c.get("name"): c for c in (patched.get("spec") or {}).get("containers") or []}
    containers = []
    for c in spec.get("containers") or []:
        w = wanted.get(c.get("name")) or {}
        c = dict(c)
        for key in ("resources", "resizePolicy"):
            if key in w:
                c[key] = w[key]
        containers.append(c)
    spec["containers"] = containers
    return dict(old, spec=spec)
