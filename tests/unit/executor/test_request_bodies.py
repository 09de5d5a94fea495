"""KubeClient encodes request bodies with pydantic-core instead of kubernetes-asyncio's Python
walk (adapters/kube._json_bodies_in_c, issue 20): the JSON sent must be the same, and what
pydantic-core cannot encode must still take the library's path."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio import client as kclient

from raybus.adapters.kube import KubeClient
from tests.unit.watcher.test_pod_slim import CLUSTER, _built_pods


async def _clients() -> tuple[kclient.ApiClient, kclient.ApiClient]:
    fast, plain = kclient.ApiClient(), kclient.ApiClient()
    KubeClient(fast)
    KubeClient(fast)  # wrapping twice is a no-op
    return fast, plain


async def test_json_bodies_encode_as_the_library_does() -> None:
    fast, plain = await _clients()
    try:
        bodies: list[Any] = [*_built_pods(CLUSTER), {"a": (1, 2.5, None, True), "b": [{"c": "d"}], "e": {}},
                             {"metadata": {"labels": {"ray.io/serve": "true"}}}]
        for body in bodies:
            got, want = fast.sanitize_for_serialization(body), plain.sanitize_for_serialization(body)
            assert json.dumps(got) == json.dumps(want)
            assert got is not body  # a copy, as the library makes
        assert fast.sanitize_for_serialization([("a", "b")]) == [("a", "b")]  # query params: library path
    finally:
        await fast.close()
        await plain.close()


async def test_openapi_models_still_take_the_library_path() -> None:
    fast, plain = await _clients()
    try:
        body = {"options": kclient.V1DeleteOptions(propagation_policy="Foreground", grace_period_seconds=0)}
        got = fast.sanitize_for_serialization(body)
        assert got == plain.sanitize_for_serialization(body)
        assert got == {"options": {"propagationPolicy": "Foreground", "gracePeriodSeconds": 0}}
    finally:
        await fast.close()
        await plain.close()
