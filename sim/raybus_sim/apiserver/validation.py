"""The subset of apiserver validation controllers trip over: names, pod basics, immutable fields.

CRD openAPIV3Schema validation/pruning is NOT done (see README).
"""

from __future__ import annotations

import re
from typing import Any

from . import errors
from .gofmt import owner_references, string_slice
from .podspec import pod_spec_causes, resize_causes
from .rbac_validation import rbac_causes
from .resources import ResourceType
from .services import service_causes
from .validation_names import (
    QNAME,
    SUBDOMAIN,
    dns1035_label_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
)

_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_QNAME = QNAME
_SUBDOMAIN = SUBDOMAIN
# Resources whose names must be DNS-1123 labels rather than subdomains.
_LABEL_NAMED = {"namespaces"}

Cause = tuple[str, str, str]


def _name_causes(rt: ResourceType, name: str) -> list[Cause]:
    if not name:
        return [("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")]
    if rt.gr == "services":
        errs = dns1035_label_errors(name)
    elif rt.gr in _LABEL_NAMED:
        errs = dns1123_label_errors(name)
    else:
        errs = dns1123_subdomain_errors(name)
    return [("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": {e}') for e in errs]


def _label_causes(labels: Any, field: str) -> list[Cause]:
    """apimachinery ValidateLabels: qualified-name keys, values <= 63 chars of [A-Za-z0-9_.-]."""
    causes: list[Cause] = []
    for k, v in (labels or {}).items():
        prefix, _, key = k.rpartition("/")
        if not key or len(key) > 63 or not _QNAME.match(key) or (prefix and not _SUBDOMAIN.match(prefix)):
            causes.append(("FieldValueInvalid", field, (f'Invalid value: "{k}": name part must consist of '
                           f"alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                           f"character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                           f"'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")))
        if not isinstance(v, str):
            causes.append(("FieldValueTypeInvalid", field, f"Invalid value: {v!r}: must be a string"))
        elif len(v) > 63:
            causes.append(("FieldValueInvalid", field, f'Invalid value: "{v}": must be no more than 63 characters'))
        elif v and not _QNAME.match(v):
            causes.append(("FieldValueInvalid", field, (f'Invalid value: "{v}": a valid label must be an empty '
                           f"string or consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                           f"with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
                           f"used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")))
    return causes


def _annotation_causes(annotations: Any) -> list[Cause]:
    total = sum(len(k) + len(str(v)) for k, v in (annotations or {}).items())
    if total > 262144:  # upstream TotalAnnotationSizeLimitB
        return [("FieldValueTooLong", "metadata.annotations", "Too long: may not be more than 262144 bytes")]
    return []


def _owner_causes(meta: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    refs = meta.get("ownerReferences") or []
    controllers = [r for r in refs if r.get("controller")]
    if len(controllers) > 1:
        causes.append(("FieldValueInvalid", "metadata.ownerReferences", f"Invalid value: {owner_references(refs)}: "
                       "Only one reference can have Controller set to true. Found \"true\" in references for "
                       + " and ".join(f"{r.get('kind')}/{r.get('name')}" for r in controllers)))
    for i, ref in enumerate(refs):
        for f in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(f):
                causes.append(("FieldValueRequired", f"metadata.ownerReferences[{i}].{f}", "Required value"))
    return causes


def _raise(rt: ResourceType, name: str, causes: list[Cause]) -> None:
    if causes:
        raise errors.invalid(rt.kind, rt.group, name, causes)


def validate_create(rt: ResourceType, obj: dict[str, Any]) -> None:
    name = obj["metadata"].get("name") or ""
    causes = _name_causes(rt, name) + _label_causes(obj["metadata"].get("labels"), "metadata.labels")
    causes += _annotation_causes(obj["metadata"].get("annotations"))
    if rt.gr == "services":
        causes += service_causes(obj.get("spec"))
    elif rt.gr == "pods":
        causes += pod_spec_causes(obj.get("spec"), "spec")
    elif rt.gr in ("deployments.apps", "statefulsets.apps"):
        tspec = ((obj.get("spec") or {}).get("template") or {}).get("spec")
        causes += pod_spec_causes(tspec, "spec.template.spec", restart_policies=("Always",))
    elif rt.group == "rbac.authorization.k8s.io":
        causes += rbac_causes(rt.kind, obj)
    elif rt.gr == "jobs.batch":
        tspec = ((obj.get("spec") or {}).get("template") or {}).get("spec")
        causes += [c for c in pod_spec_causes(tspec, "spec.template.spec")
                   if not c[1].endswith(".restartPolicy")]
        if isinstance(tspec, dict) and tspec.get("restartPolicy") not in ("OnFailure", "Never"):
            causes.append(("FieldValueRequired", "spec.template.spec.restartPolicy",
                           'Required value: valid values: "OnFailure", "Never"'))
    elif rt.gr in ("configmaps", "secrets"):
        for field in ("data", "binaryData", "stringData"):
            for key in obj.get(field) or {}:
                if not _CONFIG_KEY.match(key) or len(key) > 253:
                    causes.append(("FieldValueInvalid", f"{field}[{key}]", (f'Invalid value: "{key}": a valid '
                                   f"config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
                                   f"'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                                   f"'[-._a-zA-Z0-9]+')")))
    elif rt.gr == "customresourcedefinitions.apiextensions.k8s.io":
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        if name != f"{names.get('plural')}.{spec.get('group')}":
            causes.append(("FieldValueInvalid", "metadata.name",
                           f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
        if not spec.get("versions"):
            causes.append(("FieldValueRequired", "spec.versions", "Required value"))
    causes += _owner_causes(obj["metadata"])
    _raise(rt, name, causes)


def _pod_mutable_view(spec: dict[str, Any]) -> dict[str, Any]:
    # Upstream allows changing container images, activeDeadlineSeconds and adding tolerations.
    view = dict(spec)
    for k in ("containers", "initContainers"):
        view[k] = [{**c, "image": ""} for c in spec.get(k) or []]
    view.pop("activeDeadlineSeconds", None)
    view.pop("tolerations", None)
    view.pop("terminationGracePeriodSeconds", None)
    return view


def validate_update(rt: ResourceType, new: dict[str, Any], old: dict[str, Any], *,
                    subresource: str | None = None) -> None:
    name = old["metadata"]["name"]
    causes: list[Cause] = _label_causes(new["metadata"].get("labels"), "metadata.labels")
    causes += _annotation_causes(new["metadata"].get("annotations")) + _owner_causes(new["metadata"])
    if rt.gr in ("configmaps", "secrets") and old.get("immutable"):
        for f in ("data", "binaryData", "stringData"):
            if new.get(f) != old.get(f):
                causes.append(("FieldValueForbidden", f, "Forbidden: field is immutable when `immutable` is set"))
        if new.get("immutable") is not True:
            causes.append(("FieldValueForbidden", "immutable", ("Forbidden: field is immutable when `immutable` "
                           "is set")))
    old_fin = set(old["metadata"].get("finalizers") or [])
    if old["metadata"].get("deletionTimestamp"):
        added = [f for f in new["metadata"].get("finalizers") or [] if f not in old_fin]
        if added:
            causes.append(("FieldValueForbidden", "metadata.finalizers",
                           (f"Forbidden: no new finalizers can be added if the object is being deleted, found "
                           f"new finalizers {string_slice(added)}")))
    if rt.gr == "pods" and subresource == "resize":
        causes += resize_causes(new, old)
    elif rt.gr == "pods":
        if _pod_mutable_view(new.get("spec") or {}) != _pod_mutable_view(old.get("spec") or {}):
            causes.append(("FieldValueForbidden", "spec", ("Forbidden: pod updates may not change fields other "
                           "than `spec.containers[*].image`,`spec.initContainers[*].image`,"
                           "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
                           "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                           "previously negative)")))
    elif rt.group == "rbac.authorization.k8s.io":
        causes += rbac_causes(rt.kind, new)
        if "Binding" in rt.kind and new.get("roleRef") != old.get("roleRef"):
            ref = old.get("roleRef") or {}
            causes.append(("FieldValueInvalid", "roleRef", (f"Invalid value: rbac.RoleRef{{APIGroup:"
                           f"\"{ref.get('apiGroup', '')}\", Kind:\"{ref.get('kind', '')}\", Name:"
                           f"\"{ref.get('name', '')}\"}}: cannot change roleRef")))
    elif rt.gr == "services":
        causes += service_causes(new.get("spec"))
        old_ip = (old.get("spec") or {}).get("clusterIP")
        new_ip = (new.get("spec") or {}).get("clusterIP")
        if old_ip and new_ip != old_ip:
            causes.append(("FieldValueInvalid", "spec.clusterIPs[0]",
                           f'Invalid value: []string{{"{new_ip}"}}: may not change once set'))
    elif rt.gr == "jobs.batch":
        ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
        if ospec.get("selector") != nspec.get("selector"):
            causes.append(("FieldValueInvalid", "spec.selector", "Invalid value: field is immutable"))
        if ospec.get("template") != nspec.get("template") and not ospec.get("suspend"):
            causes.append(("FieldValueInvalid", "spec.template", "Invalid value: field is immutable"))
    _raise(rt, name, causes)
