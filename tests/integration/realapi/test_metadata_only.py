"""Metadata-only lists, gets and watches (client-go's metadata client, which the command-executor's
informers of the objects it may delete or patch use): the local API server answers them as the real
kube-apiserver does, through the same KubeClient calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from raybus.adapters.kube import METADATA_ONLY, KubeClient, KubeError, new_api_client, resource_for
from raybus_sim.apiserver import start_apiserver, write_kubeconfig
from raybus_sim.testing.envtest import ControlPlane

pytestmark = pytest.mark.integration
CONFIGMAPS = resource_for("v1", "ConfigMap")


async def _exercise(kube: KubeClient, namespace: str) -> dict[str, Any]:
    """Create a labelled ConfigMap, then read it back metadata-only every way the informers do; a
    second one created during a watch shows what a watch event carries."""
    await kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "m1", "labels": {"app": "x"}}, "data": {"secret": "v"}},
                      namespace=namespace)
    got = await kube.get(CONFIGMAPS, namespace=namespace, name="m1", metadata_only=True)
    page = await kube.list_page(CONFIGMAPS, namespace=namespace, label_selector="app=x", metadata_only=True)
    items, rv = await kube.list_all(CONFIGMAPS, namespace=namespace, label_selector="app=x", metadata_only=True)
    events: list[tuple[str, dict[str, Any]]] = []

    async def watch() -> None:
        async for event in kube.watch(CONFIGMAPS, resource_version=rv, namespace=namespace, timeout_s=5,
                                      metadata_only=True):
            events.append((event.type, event.object))
            if event.type == "ADDED":
                return

    task = asyncio.ensure_future(watch())
    await asyncio.sleep(0)
    await kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "m2", "labels": {"app": "x"}}, "data": {"k": "v"}},
                      namespace=namespace)
    await asyncio.wait_for(task, 30)
    # The single-object form asked of a list is refused (406), as client-go's metadata client knows.
    wrong: KubeError | None = None
    try:
        await kube._call("GET", CONFIGMAPS.path(namespace=namespace), accept=METADATA_ONLY)
    except KubeError as exc:
        wrong = exc
    return {"get": got, "page": page, "items": items, "events": events, "wrong": wrong}


def _check(seen: dict[str, Any]) -> None:
    got, page, items, events = seen["get"], seen["page"], seen["items"], seen["events"]
    # No data, only metadata; get keeps the wire kind until KubeClient names the resource's own.
    assert set(got) == {"apiVersion", "kind", "metadata"} and (got["apiVersion"], got["kind"]) == ("v1", "ConfigMap")
    assert got["metadata"]["labels"] == {"app": "x"} and got["metadata"]["uid"]
    assert (page["apiVersion"], page["kind"]) == ("meta.k8s.io/v1", "PartialObjectMetadataList")
    assert [(i["apiVersion"], i["kind"]) for i in page["items"]] == [("meta.k8s.io/v1", "PartialObjectMetadata")]
    assert [set(i) for i in items] == [{"apiVersion", "kind", "metadata"}]
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [("ConfigMap", "m1")]
    added = [obj for etype, obj in events if etype == "ADDED"]
    assert [(o["kind"], o["metadata"]["name"], set(o)) for o in added] == [
        ("ConfigMap", "m2", {"apiVersion", "kind", "metadata"})]
    assert seen["wrong"] is not None and seen["wrong"].code == 406


@pytest.fixture
async def real(control_plane: ControlPlane, namespace: str) -> AsyncIterator[tuple[KubeClient, str]]:
    kube = KubeClient(await new_api_client(str(control_plane.admin_kubeconfig)))
    try:
        yield kube, namespace
    finally:
        await kube.close()


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[tuple[KubeClient, str]]:
    srv = await start_apiserver(kubelet=False)
    kube = KubeClient(await new_api_client(str(write_kubeconfig(tmp_path / "kubeconfig", srv.url))))
    try:
        yield kube, "default"
    finally:
        await kube.close()
        await srv.stop()


async def test_real_api_server_answers_metadata_only(real: tuple[KubeClient, str]) -> None:
    _check(await _exercise(*real))


async def test_local_api_server_answers_metadata_only_as_the_real_one(local: tuple[KubeClient, str]) -> None:
    _check(await _exercise(*local))
