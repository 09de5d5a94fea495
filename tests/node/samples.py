"""KubeRay's samples as the node runs them, with only the edits the node needs: the image set to the
local Ray image, CPU/memory *requests* scaled to fit two cores (limits, which Ray reads as its
num-cpus and memory, unchanged), and a RayService's `working_dir` URL pointed at the same Serve apps
inside the image (deploy/node/serve-apps, zipped into localhost/ray:node)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.node.node import REPO

SAMPLES = REPO / "deploy" / "samples"
SHARED_SAMPLES = REPO.parent / "shared" / "kuberay-samples"
RAY_IMAGE = "localhost/ray:node"
LOCAL_WORKING_DIR = "file:///home/ray/apps/test_dag.zip"
CPU_REQUEST = "100m"
MEMORY_REQUEST_FRACTION = 0.25


def load(name: str) -> list[dict[str, Any]]:
    path = SAMPLES / name if (SAMPLES / name).exists() else SHARED_SAMPLES / name
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _mebibytes(quantity: str) -> int:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti)?", str(quantity))
    if not m:
        raise ValueError(f"memory quantity {quantity!r}")
    return int(float(m.group(1)) * units.get(m.group(2) or "", 1 / (1024 * 1024)))


def _containers(obj: Any) -> list[dict[str, Any]]:
    """Every container of every Pod template below `obj` (head, workers, submitter)."""
    found: list[dict[str, Any]] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                found += [c for c in value if isinstance(c, dict)]
            else:
                found += _containers(value)
    elif isinstance(obj, list):
        for item in obj:
            found += _containers(item)
    return found


def localize(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    if not doc.get("apiVersion", "").startswith("ray.io/"):
        return doc
    for c in _containers(doc.get("spec")):
        if str(c.get("image", "")).startswith("rayproject/ray"):
            c["image"] = RAY_IMAGE
        resources = c.get("resources") or {}
        # A limit without a request is also the request: scale those too.
        wanted = {**resources.get("limits", {}), **resources.get("requests", {})}
        if wanted.keys() & {"cpu", "memory"}:
            requests = resources.setdefault("requests", {})
            if "cpu" in wanted:
                requests["cpu"] = CPU_REQUEST
            if "memory" in wanted:
                requests["memory"] = f"{max(64, int(_mebibytes(wanted['memory']) * MEMORY_REQUEST_FRACTION))}Mi"
    autoscaler = doc.get("spec", {}).get("autoscalerOptions", {}).get("resources", {}).get("requests")
    if autoscaler and "cpu" in autoscaler:
        autoscaler["cpu"] = CPU_REQUEST
    serve = doc.get("spec", {}).get("serveConfigV2")
    if serve:
        doc["spec"]["serveConfigV2"] = re.sub(r'working_dir: "https://github.com/ray-project/test_dag/[^"]+"',
                                              f'working_dir: "{LOCAL_WORKING_DIR}"', serve)
    return doc


def manifest(name: str) -> str:
    """The localized sample as one JSON List for `kubectl apply -f -`."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [localize(d) for d in load(name)]})


def localized(name: str) -> list[dict[str, Any]]:
    return [localize(d) for d in load(name)]


def sample_path(name: str) -> Path:
    return SAMPLES / name if (SAMPLES / name).exists() else SHARED_SAMPLES / name
