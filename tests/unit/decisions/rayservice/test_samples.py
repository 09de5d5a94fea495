"""Every RayService sample of KubeRay becomes Ready in the test world, with a serve Service that has
endpoints and selects the active cluster; an upgrade of each then completes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.services import serve_service_name
from tests.conftest import SAMPLES
from tests.unit.decisions.rayservice.world import World

FILES = sorted(SAMPLES.glob("ray-service.*.yaml"))


def load(path: Path) -> dict[str, object]:
    doc = next(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") == "RayService")
    meta = dict(doc["metadata"])
    meta.update(namespace="default", uid=f"uid-{meta['name']}", generation=1)
    return {**doc, "metadata": meta}


def drive(w: World, rounds: int = 30) -> None:
    for _ in range(rounds):
        d = w.step()
        w.start_heads()
        w.program_gateway()
        if d.requeue_after:
            w.advance(d.requeue_after)


def test_there_are_samples() -> None:
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_sample_becomes_ready_and_upgrades(path: Path) -> None:
    w = World(load(path))
    drive(w)
    assert w.condition(c.READY)["status"] == "True", (path.name, w.history[-1].reasons)
    assert w.status["serviceStatus"] == "Running" and w.status["numServeEndpoints"] >= 1
    active = w.name("active")
    service = w.snapshot().service
    assert w.selector_cluster(serve_service_name(service)) == active
    apps = w.status["activeServiceStatus"].get("applicationStatuses") or {}
    assert apps and all(app["status"] == "RUNNING" for app in apps.values())
    # A cluster-spec change (new head env var) goes through a pending cluster and back to Ready.
    head = w.service["spec"]["rayClusterConfig"]["headGroupSpec"]
    container = dict(head["template"]["spec"]["containers"][0])
    container["env"] = [*(container.get("env") or []), {"name": "UPGRADE", "value": "1"}]
    w.update_spec(rayClusterConfig={"headGroupSpec": {"template": {"spec": {
        **head["template"]["spec"], "containers": [container, *head["template"]["spec"]["containers"][1:]]}}}})
    drive(w, 80)  # the incremental-upgrade sample moves 10 % per step
    w.advance(3600)
    drive(w, 3)
    assert w.name("active") not in ("", active) and w.name("pending") == ""
    assert set(w.clusters) == {w.name("active")}
    assert w.condition(c.READY)["status"] == "True"
