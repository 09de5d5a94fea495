"""Run corpus cases through `kubectl apply --dry-run=server --validate=strict` and read each one's
verdict: accepted, or rejected with the API server's message.

`run_kubectl` runs kubectl itself, one process per batch of files (kubectl applies every file of a
directory and reports each failure with its file name). kubectl spends about 0.15 s per object
parsing the group's OpenAPI document (its --validate=strict check), so `run_api` sends the requests
kubectl sends instead (a create: POST ?dryRun=All&fieldValidation=Strict; an update: a merge
patch), about 13 ms a case; the corpus test holds both to the same recorded verdicts.
Update cases first have their `base` created for real, then the mutated object is applied (a
dry-run patch), which is where CEL transition rules (`self == oldSelf`) act.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from raybus_sim.testing.envtest import ApiError, ControlPlane
from tests.crds.corpus import Case

BATCH = 150
KUBECTL_TIMEOUT_S = 300


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    message: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"verdict": "accepted" if self.accepted else "rejected", "message": self.message}


def case_name(index: int) -> str:
    return f"c{index:04d}"


def _named(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return {**obj, "metadata": {**(obj.get("metadata") or {}), "name": name}}


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    assert binary, "kubectl is needed on PATH"
    return subprocess.run([binary, "--kubeconfig", str(kubeconfig), *args], input=stdin, capture_output=True,
                          text=True, timeout=KUBECTL_TIMEOUT_S, check=False)


# kubectl's report of one failed file: `error when creating "<file>": <message>` for a create, and
# `... for: "<file>": error when patching "<file>": <message>` for an apply that patches.
_FAILED = re.compile(r'error when (?:creating|patching) "(?P<file>[^"]+\.yaml)": (?P<message>.*?)'
                     r'(?=\nError from server|\nerror:|\nWarning:|\Z)', re.DOTALL)


def _parse(stdout: str, stderr: str, files: dict[str, str]) -> dict[str, Verdict]:
    """file -> verdict for every file of the batch; raises if kubectl reported on neither stream."""
    out: dict[str, Verdict] = {}
    for match in _FAILED.finditer(stderr):
        out[match["file"]] = Verdict(False, " ".join(match["message"].split()))
    done = {line.split(" ", 1)[0].split("/", 1)[-1] for line in stdout.splitlines() if "(server dry run)" in line}
    for file, name in files.items():
        if file not in out and name in done:
            out[file] = Verdict(True)
    missing = sorted(set(files) - set(out))
    if missing:
        raise RuntimeError(f"kubectl reported nothing for {missing[:5]}: {stderr[-2000:]}")
    return out


def run_kubectl(cases: list[tuple[int, Case]], kubeconfig: Path, namespace: str,
                workdir: Path) -> dict[str, Verdict]:
    """Case id -> verdict. `cases` pairs each case with its index in the whole corpus (its name)."""
    updates = [(i, c) for i, c in cases if c.base is not None]
    if updates:
        bases = yaml.safe_dump_all([_named(c.base or {}, case_name(i)) for i, c in updates])
        created = kubectl(kubeconfig, "-n", namespace, "create", "-f", "-", stdin=bases)
        assert created.returncode == 0, created.stderr
    verdicts: dict[str, Verdict] = {}
    for start in range(0, len(cases), BATCH):
        batch = workdir / f"batch{start // BATCH:03d}"
        batch.mkdir(parents=True)
        files: dict[str, str] = {}
        ids: dict[str, str] = {}
        for i, case in cases[start:start + BATCH]:
            path = batch / f"{case_name(i)}.yaml"
            path.write_text(json.dumps(_named(case.obj, case_name(i))))
            files[str(path)] = case_name(i)
            ids[str(path)] = case.id
        result = kubectl(kubeconfig, "-n", namespace, "apply", "--dry-run=server", "--validate=strict",
                         "-f", str(batch))
        for file, verdict in _parse(result.stdout, result.stderr, files).items():
            verdicts[ids[file]] = verdict
    return verdicts


_PLURALS = {"RayCluster": "rayclusters", "RayJob": "rayjobs", "RayService": "rayservices", "RayCronJob": "raycronjobs"}
_MANAGER = "fieldManager=kubectl-client-side-apply"


def _message(body: object) -> str:
    text = body.get("message", "") if isinstance(body, dict) else str(body)
    return " ".join(str(text).split())


def run_api(cases: list[tuple[int, Case]], cp: ControlPlane, namespace: str) -> dict[str, Verdict]:
    """The same verdicts through the API requests kubectl makes, without kubectl."""
    verdicts: dict[str, Verdict] = {}
    for i, case in cases:
        collection = f"/apis/ray.io/v1/namespaces/{namespace}/{_PLURALS[case.kind]}"
        obj = _named(case.obj, case_name(i))
        try:
            if case.base is None:
                cp.request("POST", f"{collection}?dryRun=All&{_MANAGER}&fieldValidation=Strict", obj)
            else:
                cp.request("POST", collection, _named(case.base, case_name(i)))
                cp.request("PATCH", f"{collection}/{case_name(i)}?dryRun=All&{_MANAGER}&fieldValidation=Strict",
                           obj, content_type="application/merge-patch+json")
            verdicts[case.id] = Verdict(True)
        except ApiError as exc:
            verdicts[case.id] = Verdict(False, _message(exc.body))
    return verdicts


def run_server_side(cases: list[tuple[int, Case]], cp: ControlPlane, namespace: str) -> dict[str, Verdict]:
    """`kubectl apply --server-side --dry-run=server --validate=strict`: the apply patch it sends.
    Server-side apply keeps a null where client-side apply drops it, so a sample's `metadata:`
    left empty in a pod template is a verdict of its own."""
    verdicts: dict[str, Verdict] = {}
    for i, case in cases:
        item = f"/apis/ray.io/v1/namespaces/{namespace}/{_PLURALS[case.kind]}/{case_name(i)}"
        try:
            cp.request("PATCH", f"{item}?dryRun=All&fieldManager=kubectl&fieldValidation=Strict&force=false",
                       _named(case.obj, case_name(i)), content_type="application/apply-patch+yaml")
            verdicts[case.id] = Verdict(True)
        except ApiError as exc:
            verdicts[case.id] = Verdict(False, _message(exc.body))
    return verdicts
