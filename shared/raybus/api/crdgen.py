"""Generate apiextensions.k8s.io/v1 CRDs for the ray.io/v1 kinds from our pydantic models.

    python -m raybus.api.crdgen deploy/crds      # writes ray.io_<plural>.yaml, deterministic

Schemas are structural and complete, as KubeRay's (controller-gen) are: the models give the Ray
fields, :mod:`raybus.api.crd_markers` KubeRay's markers (defaults, enums, CEL) and which Kubernetes
type each embedded object is (pod templates, Services, env, resources ...), and
:mod:`raybus.api.crd_core` inlines that type's full schema from the pinned kube-apiserver OpenAPI
snapshot. So the API server rejects a typo or a wrong type anywhere in a pod template at apply time,
as it does with KubeRay's CRDs, and ``kubectl explain`` reaches every field. No descriptions
(KubeRay generates with ``maxDescLen=0``; with them the CRDs pass etcd's request size limit).
Like KubeRay's CRDs they have ``categories: [all]`` and no shortNames. At 1 MB each they exceed
client-side apply's annotation limit: install them with ``kubectl apply --server-side``.
"""

from __future__ import annotations

import copy
import sys
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel

from raybus.api.crd_core import QUANTITY, core_schema
from raybus.api.crd_markers import AS_CORE, EMBEDDED, FIELD_MARKERS, OBJECT_MARKERS, REQUIRED
from raybus.api.meta import GROUP, VERSION, RayModel, RayObject
from raybus.api.raycluster import RayCluster
from raybus.api.raycronjob import RayCronJob
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService

Schema = dict[str, Any]

_PRESERVE: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _column(name: str, path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    column: dict[str, Any] = {"jsonPath": path, "name": name, "type": kind}
    if priority:
        column["priority"] = priority
    return column


# Printer columns exactly as the kubebuilder:printcolumn markers of KubeRay v1.7.
PRINTER_COLUMNS: dict[type[RayObject], list[dict[str, Any]]] = {
    RayCluster: [
        _column("desired workers", ".status.desiredWorkerReplicas", "integer"),
        _column("available workers", ".status.availableWorkerReplicas", "integer"),
        _column("cpus", ".status.desiredCPU"),
        _column("memory", ".status.desiredMemory"),
        _column("gpus", ".status.desiredGPU"),
        _column("tpus", ".status.desiredTPU", priority=1),
        _column("status", ".status.state"),
        _column("age", ".metadata.creationTimestamp", "date"),
        _column("head pod IP", ".status.head.podIP", priority=1),
        _column("head service IP", ".status.head.serviceIP", priority=1),
    ],
    RayJob: [
        _column("job status", ".status.jobStatus"),
        _column("deployment status", ".status.jobDeploymentStatus"),
        _column("ray cluster name", ".status.rayClusterName"),
        _column("start time", ".status.startTime"),
        _column("end time", ".status.endTime"),
        _column("age", ".metadata.creationTimestamp", "date"),
    ],
    RayService: [
        _column("service status", ".status.serviceStatus"),
        _column("num serve endpoints", ".status.numServeEndpoints"),
    ],
    RayCronJob: [
        _column("schedule", ".spec.schedule"),
        _column("timezone", ".spec.timeZone"),
        _column("last schedule", ".status.lastScheduleTime", "date"),
        _column("age", ".metadata.creationTimestamp", "date"),
        _column("suspend", ".spec.suspend", "boolean"),
    ],
}

PLURALS: dict[type[RayObject], str] = {
    RayCluster: "rayclusters",
    RayJob: "rayjobs",
    RayService: "rayservices",
    RayCronJob: "raycronjobs",
}


def _non_none(annotation: Any) -> list[Any]:
    if get_origin(annotation) in (Union, types.UnionType):
        return [a for a in get_args(annotation) if a is not type(None)]
    return [annotation]


def type_schema(annotation: Any) -> Schema:
    """Structural schema for one field annotation."""
    members = _non_none(annotation)
    if len(members) > 1:
        kinds = set(members)
        if str in kinds and kinds <= {str, int, float}:
            return copy.deepcopy(QUANTITY)  # resource.Quantity
        if kinds <= {int, float}:
            return {"type": "number"}
        raise TypeError(f"unsupported union {annotation!r}")
    (tp,) = members
    origin = get_origin(tp)
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"format": "int32", "type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is Any:
        return dict(_PRESERVE)
    if origin is list:
        return {"items": type_schema(get_args(tp)[0]), "type": "array"}
    if origin is dict:
        value = get_args(tp)[1]
        if value is Any:
            return dict(_PRESERVE)  # an embedded Kubernetes object
        return {"additionalProperties": type_schema(value), "type": "object"}
    if tp in AS_CORE:
        return core_schema(AS_CORE[tp])
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return model_schema(tp)
    raise TypeError(f"unsupported annotation {tp!r}")


def embedded_type(model: type[BaseModel], name: str) -> str | None:
    """The Kubernetes type KubeRay's field `name` of `model` (or of a base model) has, if any."""
    for base in model.__mro__:
        if isinstance(base, type) and issubclass(base, RayModel) and (base, name) in EMBEDDED:
            return EMBEDDED[(base, name)]
    return None


def field_schema(model: type[BaseModel], name: str, annotation: Any) -> Schema:
    kind = embedded_type(model, name)
    if kind is None:
        return type_schema(annotation)
    (tp,) = _non_none(annotation)
    if get_origin(tp) is list:
        return {"items": core_schema(kind), "type": "array"}
    return core_schema(kind)


def model_schema(model: type[BaseModel]) -> Schema:
    properties: dict[str, Schema] = {}
    for name, info in model.model_fields.items():
        schema = field_schema(model, name, info.annotation)
        if isinstance(model, type) and issubclass(model, RayModel):
            schema.update(copy.deepcopy(FIELD_MARKERS.get((model, name), {})))
        properties[info.alias or name] = schema
    out: Schema = {"properties": dict(sorted(properties.items())), "type": "object"}
    if issubclass(model, RayModel):
        if model in REQUIRED:
            out["required"] = sorted(REQUIRED[model])
        out.update(copy.deepcopy(OBJECT_MARKERS.get(model, {})))
    return out


def object_schema(kind: type[RayObject]) -> Schema:
    fields = kind.model_fields
    return {
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": type_schema(fields["spec"].annotation),
            "status": type_schema(fields["status"].annotation),
        },
        "type": "object",
    }


def crd(kind: type[RayObject]) -> dict[str, Any]:
    plural = PLURALS[kind]
    name = kind.__name__
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "categories": ["all"],
                "kind": name,
                "listKind": f"{name}List",
                "plural": plural,
                "singular": name.lower(),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "additionalPrinterColumns": copy.deepcopy(PRINTER_COLUMNS[kind]),
                    "name": VERSION,
                    "schema": {"openAPIV3Schema": object_schema(kind)},
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                }
            ],
        },
    }


# libyaml's emitter when PyYAML has it (the same text, twice as fast on 2.5 MB of CRDs).
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _NoAliasDumper(_SafeDumper):  # type: ignore[misc,valid-type]
    """Write repeated sub-schemas out in full: anchors make the CRDs hard to read and diff, and some
    Kubernetes tooling mishandles them."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(document: dict[str, Any]) -> str:
    body = yaml.dump(document, Dumper=_NoAliasDumper, sort_keys=True, default_flow_style=False, width=100)
    return "---\n" + body


def generate() -> dict[str, str]:
    """File name -> YAML text for every CRD (pure; no I/O)."""
    return {f"{GROUP}_{PLURALS[kind]}.yaml": render(crd(kind)) for kind in PLURALS}


KUSTOMIZATION = "kustomization.yaml"


def kustomization(filenames: list[str]) -> str:
    """The CRD directory's kustomization: deploy/kustomize/base includes the CRDs as this directory
    (kustomize only loads files below a kustomization's own root)."""
    body = yaml.dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                      "resources": sorted(filenames)}, sort_keys=False, default_flow_style=False)
    return "# Generated by `make crds` (python -m raybus.api.crdgen deploy/crds).\n" + body


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    crds = generate()
    for filename, text in {**crds, KUSTOMIZATION: kustomization(list(crds))}.items():
        path = directory / filename
        path.write_text(text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m raybus.api.crdgen OUTPUT_DIR", file=sys.stderr)
        return 2
    for path in write(Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
