"""deploy/k8s/raybus.yaml: one Deployment per service; write access only for the executor."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
DOCS = list(yaml.safe_load_all((REPO / "deploy/k8s/raybus.yaml").read_text()))
WRITE = {"create", "update", "patch", "delete"}


def test_one_deployment_per_service_folder() -> None:
    deployments = {d["metadata"]["name"].removeprefix("raybus-") for d in DOCS
                   if d["kind"] == "Deployment"}
    assert deployments == {p.name for p in (REPO / "services").iterdir() if p.is_dir()}


def test_only_the_executor_can_write_and_reconcilers_have_no_credentials() -> None:
    roles = {d["metadata"]["name"]: d for d in DOCS if d["kind"] == "ClusterRole"}
    assert not any(set(r["verbs"]) & WRITE for r in roles["raybus-watcher"]["rules"])
    assert any(set(r["verbs"]) & WRITE for r in roles["raybus-command-executor"]["rules"])
    for d in DOCS:
        if d["kind"] == "Deployment" and d["metadata"]["name"].endswith(("reconciler", "poller")):
            assert d["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
