"""`make crd-verdicts` (python -m tests.crds.record_kuberay --kuberay-git DIR): KubeRay v1.7.0's
verdict on every corpus case (tests/crds/corpus.py), the expected data of the CRD verdict tests.

KubeRay's CRDs are read from a git repository of github.com/ray-project/kuberay at tag v1.7.0
(`ray-operator/config/crd/bases`, the files controller-gen wrote; they are never copied into this
repository) and installed on a control plane of this script's own (raybus_sim.testing.envtest: the
real kube-apiserver v1.36.2; their names are raybus's CRDs' names). Every case then goes through
`kubectl apply --dry-run=server --validate=strict` there (tests/crds/verdicts.py) and the verdicts
are written to tests/crds/kuberay-v1.7.0-verdicts.json, with where they came from.

    git clone --bare https://github.com/ray-project/kuberay /tmp/kuberay.git
    make crd-verdicts KUBERAY_GIT=/tmp/kuberay.git
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from raybus_sim.testing.envtest import install_crds, start_control_plane
from tests.crds.corpus import cases
from tests.crds.verdicts import kubectl, run_kubectl, run_server_side

TAG = "v1.7.0"
CRD_DIR = "ray-operator/config/crd/bases"
VERDICTS = Path(__file__).with_name(f"kuberay-{TAG}-verdicts.json")
NAMESPACE = "corpus"


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                          check=True).stdout


def kuberay_crds(git_dir: Path, out: Path) -> dict[str, str]:
    """Write KubeRay's CRDs at TAG to `out` (a temporary directory); file -> git blob id."""
    blobs: dict[str, str] = {}
    for line in _git(git_dir, "ls-tree", f"{TAG}:{CRD_DIR}").splitlines():
        _, kind, blob, name = line.split(maxsplit=3)
        if kind == "blob" and name.endswith(".yaml"):
            (out / name).write_text(_git(git_dir, "show", f"{TAG}:{CRD_DIR}/{name}"))
            blobs[name] = blob
    if len(blobs) != 4:
        raise SystemExit(f"expected KubeRay's 4 CRDs in {TAG}:{CRD_DIR}, found {sorted(blobs)}")
    return blobs


def record(git_dir: Path) -> tuple[dict[str, Any], float]:
    corpus = cases()
    with tempfile.TemporaryDirectory(prefix="kuberay-verdicts-") as tmp:
        work = Path(tmp)
        (work / "crds").mkdir()
        blobs = kuberay_crds(git_dir, work / "crds")
        cp = start_control_plane(work / "cp")
        try:
            install_crds(cp, [work / "crds"])
            cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
            version = cp.request("GET", "/version")["gitVersion"]
            kubectl_version = kubectl(cp.admin_kubeconfig, "version", "--client", "-o", "json").stdout
            started = time.monotonic()
            verdicts = run_kubectl(list(enumerate(corpus)), cp.admin_kubeconfig, NAMESPACE, work / "cases")
            seconds = time.monotonic() - started
            samples = [(i, c) for i, c in enumerate(corpus) if c.id.startswith("sample/")]
            server_side = run_server_side(samples, cp, NAMESPACE)
        finally:
            cp.stop()
    return {
        "source": {
            "kuberay": {"tag": TAG, "commit": _git(git_dir, "rev-list", "-n", "1", TAG).strip(),
                        "crds": {f"{CRD_DIR}/{k}": v for k, v in sorted(blobs.items())}},
            "kube-apiserver": version,
            "kubectl": json.loads(kubectl_version)["clientVersion"]["gitVersion"],
            "command": "kubectl apply --dry-run=server --validate=strict",
            "recorded-by": "make crd-verdicts (python -m tests.crds.record_kuberay)",
        },
        "cases": [{"id": c.id, "digest": c.digest(), **verdicts[c.id].as_json()} for c in corpus],
        # the samples again, with `kubectl apply --server-side --dry-run=server --validate=strict`
        "server-side": [{"id": c.id, **server_side[c.id].as_json()} for _, c in samples],
    }, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="record_kuberay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kuberay-git", type=Path, required=True,
                        help=f"a git repository (or bare git dir) of ray-project/kuberay holding tag {TAG}")
    args = parser.parse_args(argv)
    data, seconds = record(args.kuberay_git)
    VERDICTS.write_text(json.dumps(data, indent=1) + "\n")
    counts = {v: sum(c["verdict"] == v for c in data["cases"]) for v in ("accepted", "rejected")}
    print(f"{VERDICTS}: {len(data['cases'])} cases, {counts} in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
