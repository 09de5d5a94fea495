"""rbac.authorization.k8s.io object validation (pkg/apis/rbac/validation), with upstream's messages."""

from __future__ import annotations

from typing import Any

from .gofmt import string_slice

Cause = tuple[str, str, str]
GROUP = "rbac.authorization.k8s.io"


def rule_causes(rule: dict[str, Any], path: str, *, namespaced: bool) -> list[Cause]:
    """ValidatePolicyRule."""
    causes: list[Cause] = []
    if not rule.get("verbs"):
        causes.append(("FieldValueRequired", f"{path}.verbs", "Required value: verbs must contain at least one value"))
    urls = rule.get("nonResourceURLs") or []
    if urls:
        if namespaced:
            causes.append(("FieldValueInvalid", f"{path}.nonResourceURLs", (f"Invalid value: {string_slice(urls)}: "
                           "namespaced rules cannot apply to non-resource URLs")))
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            causes.append(("FieldValueInvalid", f"{path}.nonResourceURLs", (f"Invalid value: {string_slice(urls)}: "
                           "rules cannot apply to both regular resources and non-resource URLs")))
        return causes
    if not rule.get("apiGroups"):
        causes.append(("FieldValueRequired", f"{path}.apiGroups",
                       "Required value: resource rules must supply at least one api group"))
    if not rule.get("resources"):
        causes.append(("FieldValueRequired", f"{path}.resources",
                       "Required value: resource rules must supply at least one resource"))
    return causes


def _subject_causes(subject: dict[str, Any], path: str) -> list[Cause]:
    kind, name = subject.get("kind"), subject.get("name")
    causes: list[Cause] = []
    if not name:
        causes.append(("FieldValueRequired", f"{path}.name", "Required value"))
    if kind == "ServiceAccount":
        if subject.get("apiGroup"):
            causes.append(("FieldValueNotSupported", f"{path}.apiGroup", (f'Unsupported value: "{subject["apiGroup"]}": '
                           'supported values: ""')))
    elif kind in ("User", "Group"):
        if subject.get("apiGroup") != GROUP:
            causes.append(("FieldValueNotSupported", f"{path}.apiGroup", (f'Unsupported value: '
                           f'"{subject.get("apiGroup", "")}": supported values: "{GROUP}"')))
    else:
        causes.append(("FieldValueNotSupported", f"{path}.kind", (f'Unsupported value: "{kind or ""}": supported '
                       'values: "ServiceAccount", "User", "Group"')))
    return causes


def rbac_causes(kind: str, obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    if kind in ("Role", "ClusterRole"):
        for i, rule in enumerate(obj.get("rules") or []):
            causes += rule_causes(rule, f"rules[{i}]", namespaced=kind == "Role")
        return causes
    ref = obj.get("roleRef") or {}
    kinds = ("Role", "ClusterRole") if kind == "RoleBinding" else ("ClusterRole",)
    if ref.get("apiGroup") != GROUP:
        causes.append(("FieldValueNotSupported", "roleRef.apiGroup", (f'Unsupported value: "{ref.get("apiGroup", "")}": '
                       f'supported values: "{GROUP}"')))
    if ref.get("kind") not in kinds:
        causes.append(("FieldValueNotSupported", "roleRef.kind", f'Unsupported value: "{ref.get("kind", "")}": '
                       "supported values: " + ", ".join(f'"{k}"' for k in kinds)))
    if not ref.get("name"):
        causes.append(("FieldValueRequired", "roleRef.name", "Required value"))
    for i, subject in enumerate(obj.get("subjects") or []):
        causes += _subject_causes(subject, f"subjects[{i}]")
    return causes
