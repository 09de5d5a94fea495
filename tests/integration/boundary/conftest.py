"""Boundary fixtures: the local Kubernetes API server (raybus_sim.apiserver, real HTTP on a loopback
port), a kubeconfig for it, and helpers to read what landed on NATS."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from raybus_sim.apiserver import DEFAULT_CRD_DIR, RunningApiServer, start_apiserver, write_kubeconfig

RAY_KINDS = (("RayCluster", "rayclusters"), ("RayJob", "rayjobs"), ("RayService", "rayservices"))


def _minimal_crd(kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.ray.io"},
        "spec": {"group": "ray.io", "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                           "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {
                                   "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


@pytest.fixture
def crd_dir(tmp_path: Path) -> Path:
    """deploy/crds once it holds the ray.io CRDs; until then minimal schemaless ones."""
    if any("rayclusters" in p.read_text() for p in DEFAULT_CRD_DIR.glob("*.y*ml")):
        return DEFAULT_CRD_DIR
    out = tmp_path / "crds"
    out.mkdir()
    for kind, plural in RAY_KINDS:
        (out / f"{plural}.yaml").write_text(yaml.safe_dump(_minimal_crd(kind, plural)))
    return out


@pytest.fixture
async def apiserver(crd_dir: Path) -> AsyncIterator[RunningApiServer]:
    server = await start_apiserver(crd_dir=crd_dir, kubelet=False)
    yield server
    await server.stop()


@pytest.fixture
def kubeconfig(apiserver: RunningApiServer, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", apiserver.url)


async def until(cond: Callable[[], Awaitable[Any]], *, timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await cond()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def last_msg(js: JetStreamContext, stream: str, subject: str) -> Any:
    """The stream's last message on subject (None if none): triggers/objects/outcomes keep one."""
    try:
        return await js.get_last_msg(stream, subject)
    except NotFoundError:
        return None


def sample_raycluster(name: str) -> dict[str, Any]:
    """KubeRay's sample RayCluster (valid against the generated CRD schema), renamed."""
    from tests.conftest import SAMPLES

    doc = yaml.safe_load((SAMPLES / "ray-cluster.sample.yaml").read_text())
    doc["metadata"] = {"name": name}
    return dict(doc)
