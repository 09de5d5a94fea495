"""`make crds-openapi` (python -m tests.crds.openapi_snapshot): the pinned Kubernetes schemas that
`make crds` inlines into the CRDs (raybus.api.crd_core).

Starts the real kube-apiserver of raybus_sim.testing.envtest (../shared/envtest, v1.36.2), reads its
`/openapi/v3/<document>` for each of crd_core.DOCUMENTS, and keeps every definition the CRDs
reach from the types raybus.api.crd_markers.EMBEDDED names (and metav1.Condition), without
descriptions (KubeRay's CRDs have none: maxDescLen=0). The file records the server's version and
each whole document's sha256, so a refresh that changes nothing leaves it byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from raybus.api.crd_core import DOCUMENTS, META, SNAPSHOT, SPECIAL
from raybus.api.crd_markers import EMBEDDED
from raybus_sim.testing.envtest import start_control_plane

Schema = dict[str, Any]


def roots() -> list[str]:
    return sorted({*EMBEDDED.values(), META + "Condition"})


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                found.add(str(value).rsplit("/", 1)[-1])
            else:
                found |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= _refs(value)
    return found


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def closure(definitions: dict[str, Schema], start: list[str]) -> dict[str, Schema]:
    """Every definition reachable from `start`, minus the ones crd_core writes by its own rule."""
    kept: dict[str, Schema] = {}
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in kept or name in SPECIAL:
            continue
        kept[name] = _strip(definitions[name])
        todo.extend(_refs(definitions[name]))
    return dict(sorted(kept.items()))


def take(workdir: Path) -> dict[str, Any]:
    cp = start_control_plane(workdir)
    try:
        version = cp.request("GET", "/version")
        definitions: dict[str, Schema] = {}
        documents: dict[str, str] = {}
        for path in DOCUMENTS:
            doc = cp.request("GET", f"/openapi/v3/{path}")
            documents[path] = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
            definitions.update(doc["components"]["schemas"])
    finally:
        cp.stop()
    return {"source": {"kube-apiserver": version.get("gitVersion"), "documents": documents,
                       "roots": roots(), "taken-by": "make crds-openapi (python -m tests.crds.openapi_snapshot)"},
            "schemas": closure(definitions, roots())}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="openapi-snapshot-") as tmp:
        data = take(Path(tmp))
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    SNAPSHOT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"{SNAPSHOT}: {len(data['schemas'])} definitions from {data['source']['kube-apiserver']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
