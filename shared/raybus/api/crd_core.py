"""Kubernetes core schemas (PodTemplateSpec, Service, EnvVar, NetworkPolicy rules ...) for the CRDs,
as controller-gen v0.16.5 writes them in KubeRay's CRDs (``crd:maxDescLen=0,generateEmbeddedObjectMeta=true``).

The source is a pinned snapshot of the real kube-apiserver's ``/openapi/v3`` documents
(``openapi/k8s-<version>.json``, taken by ``make crds-openapi``), so ``make crds`` runs offline and
the result only changes when the snapshot does. The API server's OpenAPI and controller-gen's output
differ in ways that decide verdicts, and each rule below is what controller-gen does:

- every ``$ref`` is inlined (CRD schemas may not reference);
- ``enum`` goes: Go's ``+enum`` types (``imagePullPolicy``, ``protocol`` ...) are plain strings to
  controller-gen, so a bad value is the Pod create's error, not the CRD's;
- a ``default`` stays only where Kubernetes' types carry a ``+default`` marker (a scalar on an
  optional field: ``protocol: TCP``, ``name: ""``); openapi-gen's zero defaults of required fields
  and its ``{}`` for nested structs are not controller-gen's;
- descriptions and the strategic-merge-patch / GVK extensions go, list and map types stay;
- Quantity is int-or-string with the Quantity pattern, IntOrString int-or-string, Time a date-time
  string, ObjectMeta inside a template the five fields of ``generateEmbeddedObjectMeta``;
- kubebuilder validation markers in the Go types (metav1.Condition's, PortStatus.error's), which
  openapi-gen does not read, come from :data:`MARKERS`.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

Schema = dict[str, Any]

K8S_VERSION = "1.36.2"
SNAPSHOT = Path(__file__).with_name("openapi") / f"k8s-{K8S_VERSION}.json"

# The OpenAPI v3 documents (kube-apiserver /openapi/v3/<path>) the snapshot is cut from.
DOCUMENTS = ("api/v1", "apis/networking.k8s.io/v1")

CORE = "io.k8s.api.core.v1."
NETWORKING = "io.k8s.api.networking.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."

QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
                    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
INT_OR_STRING: Schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
QUANTITY: Schema = {**INT_OR_STRING, "pattern": QUANTITY_PATTERN}
DATE_TIME: Schema = {"format": "date-time", "type": "string"}
_STRING_MAP: Schema = {"additionalProperties": {"type": "string"}, "type": "object"}
EMBEDDED_META: Schema = {
    "properties": {
        "annotations": _STRING_MAP,
        "finalizers": {"items": {"type": "string"}, "type": "array"},
        "labels": _STRING_MAP,
        "name": {"type": "string"},
        "namespace": {"type": "string"},
    },
    "type": "object",
}

# Types controller-gen writes by a rule of its own rather than from their Go fields.
SPECIAL: dict[str, Schema] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": QUANTITY,
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": INT_OR_STRING,
    META + "Time": DATE_TIME,
    META + "MicroTime": DATE_TIME,
    META + "ObjectMeta": EMBEDDED_META,
    "io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}

_CONDITION_TYPE_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                           r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")

# kubebuilder markers in k8s.io/api and apimachinery's Go types, which openapi-gen does not read:
# definition -> property -> schema keys added ("": the object itself).
MARKERS: dict[str, dict[str, Schema]] = {
    META + "Condition": {
        "type": {"maxLength": 316, "pattern": _CONDITION_TYPE_PATTERN},
        "status": {"enum": ["True", "False", "Unknown"]},
        "observedGeneration": {"minimum": 0},
        "reason": {"maxLength": 1024, "minLength": 1, "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
        "message": {"maxLength": 32768},
    },
    # `+kubebuilder:validation:Required` on an omitempty pointer
    CORE + "PortStatus": {"": {"required": ["error", "port", "protocol"]},
                          "error": {"maxLength": 316, "pattern": _CONDITION_TYPE_PATTERN}},
    # `+structType=atomic` of an embedded LocalObjectReference, which controller-gen carries over
    **{CORE + name: {"": {"x-kubernetes-map-type": "atomic"}} for name in (
        "ConfigMapEnvSource", "SecretEnvSource", "ConfigMapVolumeSource", "ConfigMapProjection",
        "SecretProjection")},
}

# `+default=ref(...)` markers: controller-gen cannot resolve a Go constant, so it writes no default.
NO_DEFAULT: dict[str, set[str]] = {CORE + "AzureDiskVolumeSource": {"cachingMode", "kind"}}

_DROPPED = {"description", "enum", "x-kubernetes-patch-merge-key", "x-kubernetes-patch-strategy",
            "x-kubernetes-group-version-kind", "x-kubernetes-unions"}


@cache
def snapshot() -> dict[str, Any]:
    """The pinned snapshot: {"source": {...}, "schemas": {definition name: OpenAPI v3 schema}}."""
    data: dict[str, Any] = json.loads(SNAPSHOT.read_text())
    return data


def _ref_name(node: Schema) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).rsplit("/", 1)[-1]
    return None


class CoreSchemas:
    """Definition name -> the schema controller-gen would inline for it (each built once)."""

    def __init__(self, definitions: dict[str, Schema]) -> None:
        self._definitions = definitions
        self._built: dict[str, Schema] = {}

    def schema(self, name: str) -> Schema:
        if name not in self._built:
            self._built[name] = self._build(name)
        return copy.deepcopy(self._built[name])

    def _build(self, name: str) -> Schema:
        if name in SPECIAL:
            return copy.deepcopy(SPECIAL[name])
        if name not in self._definitions:
            raise KeyError(f"{name} is not in the OpenAPI snapshot {SNAPSHOT.name} (make crds-openapi)")
        out = self._node(self._definitions[name])
        for prop in NO_DEFAULT.get(name, ()):
            out["properties"][prop].pop("default", None)
        for prop, extra in MARKERS.get(name, {}).items():
            (out["properties"][prop] if prop else out).update(copy.deepcopy(extra))
        return out

    def _node(self, node: Schema) -> Schema:
        ref = _ref_name(node)
        out: Schema = self.schema(ref) if ref else {}
        required = set(node.get("required") or [])
        for key, value in node.items():
            if key in _DROPPED or key in ("$ref", "allOf"):
                continue
            if key == "default":
                # openapi-gen's {} / [] for nested structs; scalars only where a +default marker is
                if isinstance(value, (dict, list)):
                    continue
                out[key] = value
            elif key == "properties":
                out[key] = {}
                for prop, sub in sorted(value.items()):
                    schema = self._node(sub)
                    if prop in required:
                        schema.pop("default", None)  # openapi-gen's zero value of a required field
                    out[key][prop] = schema
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = self._node(value)
            elif key == "required":
                out[key] = sorted(value)  # controller-gen's order
            else:
                out[key] = copy.deepcopy(value)
        return out


@cache
def core_schemas() -> CoreSchemas:
    return CoreSchemas(snapshot()["schemas"])


def core_schema(name: str) -> Schema:
    """The CRD schema of one Kubernetes type, e.g. ``core_schema(CORE + "PodTemplateSpec")``."""
    return core_schemas().schema(name)
