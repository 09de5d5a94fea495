"""Finalizers and ownerReference garbage collection (background, foreground, orphan) via kubernetes-asyncio."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from .helpers import eventually

pytestmark = pytest.mark.integration
RC = {"group": "ray.io", "version": "v1", "plural": "rayclusters"}
MERGE = {"_content_type": "application/merge-patch+json"}


async def _owner(api: client.ApiClient, name: str) -> dict:
    return await client.CustomObjectsApi(api).create_namespaced_custom_object(
        **RC, namespace="default", body={"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                         "metadata": {"name": name}, "spec": {}})


def _ref(owner: dict, *, block: bool = False) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": block}


async def _exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        await core.read_namespaced_config_map(name, "default")
        return True
    except ApiException as exc:
        assert exc.status == 404
        return False


async def test_finalizers_block_deletion_until_removed(api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    await co.create_namespaced_custom_object(**RC, namespace="default", body={
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "f", "finalizers": ["ray.io/cleanup"]}, "spec": {}})
    marked = await co.delete_namespaced_custom_object(**RC, namespace="default", name="f")
    assert marked["metadata"]["deletionTimestamp"] and marked["metadata"]["generation"] == 2
    got = await co.get_namespaced_custom_object(**RC, namespace="default", name="f")
    assert got["metadata"]["finalizers"] == ["ray.io/cleanup"]
    with pytest.raises(ApiException) as exc:  # no new finalizers once deleting
        await co.patch_namespaced_custom_object(**RC, namespace="default", name="f", body={
            "metadata": {"finalizers": ["ray.io/cleanup", "other"]}}, **MERGE)
    assert exc.value.status == 422
    await co.patch_namespaced_custom_object(**RC, namespace="default", name="f",
                                            body={"metadata": {"finalizers": None}}, **MERGE)
    with pytest.raises(ApiException) as exc:
        await co.get_namespaced_custom_object(**RC, namespace="default", name="f")
    assert exc.value.status == 404


async def test_background_gc_deletes_dependents(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    owner = await _owner(api, "bg")
    other = await _owner(api, "other")
    await core.create_namespaced_config_map("default", {"metadata": {"name": "dep", "ownerReferences": [_ref(owner)]}})
    two = {**_ref(other), "controller": False}
    await core.create_namespaced_config_map("default", {"metadata": {"name": "shared",
                                                                     "ownerReferences": [_ref(owner), two]}})
    await client.CustomObjectsApi(api).delete_namespaced_custom_object(**RC, namespace="default", name="bg")
    await eventually(lambda: _gone(core, "dep"))
    shared = await core.read_namespaced_config_map("shared", "default")  # still owned by "other"
    assert [r.name for r in shared.metadata.owner_references] == ["other"]


async def _gone(core: client.CoreV1Api, name: str) -> bool:
    return not await _exists(core, name)


async def test_foreground_waits_for_blocking_dependents(api: client.ApiClient) -> None:
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    owner = await _owner(api, "fg")
    await core.create_namespaced_config_map("default", {"metadata": {
        "name": "blocker", "finalizers": ["test/hold"], "ownerReferences": [_ref(owner, block=True)]}})
    await co.delete_namespaced_custom_object(**RC, namespace="default", name="fg",
                                             body={"propagationPolicy": "Foreground"})

    async def blocker_deleting() -> bool:
        cm = await core.read_namespaced_config_map("blocker", "default")
        return cm.metadata.deletion_timestamp is not None

    await eventually(blocker_deleting)
    got = await co.get_namespaced_custom_object(**RC, namespace="default", name="fg")
    assert "foregroundDeletion" in got["metadata"]["finalizers"] and got["metadata"]["deletionTimestamp"]
    await core.patch_namespaced_config_map("blocker", "default", {"metadata": {"finalizers": None}})

    async def owner_gone() -> bool:
        try:
            await co.get_namespaced_custom_object(**RC, namespace="default", name="fg")
            return False
        except ApiException as exc:
            return exc.status == 404

    await eventually(owner_gone)


async def test_orphan_keeps_dependents_without_owner_ref(api: client.ApiClient) -> None:
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    owner = await _owner(api, "orph")
    await core.create_namespaced_config_map("default", {"metadata": {"name": "kept", "ownerReferences": [_ref(owner)]}})
    await co.delete_namespaced_custom_object(**RC, namespace="default", name="orph", propagation_policy="Orphan")

    async def orphaned() -> bool:
        cm = await core.read_namespaced_config_map("kept", "default")
        return not cm.metadata.owner_references

    await eventually(orphaned)
    with pytest.raises(ApiException):
        await co.get_namespaced_custom_object(**RC, namespace="default", name="orph")


async def test_dangling_owner_reference_is_collected(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    ghost = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "ghost", "uid": "no-such-uid"}
    await core.create_namespaced_config_map("default", {"metadata": {"name": "dangling", "ownerReferences": [ghost]}})
    await eventually(lambda: _gone(core, "dangling"))


async def test_namespace_deletion_empties_then_removes(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespace({"metadata": {"name": "scratch"}})
    await core.create_namespaced_config_map("scratch", {"metadata": {"name": "x"}})
    sas = await core.list_namespaced_service_account("scratch")
    assert [s.metadata.name for s in sas.items] == ["default"]
    await core.delete_namespace("scratch")

    async def ns_gone() -> bool:
        try:
            ns = await core.read_namespace("scratch")
            assert ns.status.phase == "Terminating"
            return False
        except ApiException as exc:
            return exc.status == 404

    await eventually(ns_gone)
    assert (await core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=scratch")).items == []
