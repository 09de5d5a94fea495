"""The API server's fault switch (sim/raybus_sim/apiserver/faults.py), as the chaos soak uses it:
429 with Retry-After, 500 InternalError and a hang then 504 Timeout, for a ServiceAccount's
requests only, for a bounded time; and raybus's Kubernetes client riding out a 429 as client-go
does."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client import REGISTRY

from raybus.adapters.kube import KubeClient, KubeError, new_api_client, resource_for, retry_after
from raybus_sim.apiserver import RunningApiServer, write_kubeconfig
from raybus_sim.apiserver.auth import ADMIN_TOKEN

PODS = "/api/v1/namespaces/default/pods"
POD = resource_for("v1", "Pod")


async def test_the_fault_switch_answers_like_kube_apiserver_then_ends(server: RunningApiServer) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=server.url) as http:
        r = await http.post("/api/v1/namespaces/default/serviceaccounts", headers=admin,
                            json={"metadata": {"name": "op"}})
        assert r.status_code == 201, r.text
        sa = {"Authorization": f"Bearer {server.service_account_token('default', 'op')}"}
        normal = (await http.get(PODS, headers=sa)).status_code  # 403 without RBAC: served, not faulted

        r = await http.post("/sim/apiserver/faults", json={"kind": "429", "seconds": 30})
        assert r.json()["kind"] == "429"
        r = await http.get(PODS, headers=sa)
        assert r.status_code == 429 and r.headers["Retry-After"] == "1"
        body = r.json()
        assert (body["reason"], body["code"], body["details"]) == ("TooManyRequests", 429, {"retryAfterSeconds": 1})
        assert (await http.get(PODS, headers=admin)).status_code == 200  # the sim's node and the soak

        await http.post("/sim/apiserver/faults", json={"kind": "500", "seconds": 30})
        r = await http.post(PODS, headers=sa, json={})
        assert r.status_code == 500 and r.json()["reason"] == "InternalError"

        await http.post("/sim/apiserver/faults", json={"kind": "timeout", "seconds": 30, "hang_s": 0.3})
        started = time.monotonic()
        r = await http.get(PODS, headers=sa)
        assert r.status_code == 504 and r.json()["reason"] == "Timeout"
        assert time.monotonic() - started >= 0.3

        r = await http.delete("/sim/apiserver/faults")
        assert r.json()["kind"] == "" and r.json()["served"] == {"429": 1, "500": 1, "timeout": 1}
        assert (await http.get(PODS, headers=sa)).status_code == normal

        # bounded: it ends by itself
        await http.post("/sim/apiserver/faults", json={"kind": "500", "seconds": 0.2})
        assert (await http.get(PODS, headers=sa)).status_code == 500
        deadline = time.monotonic() + 5
        while (await http.get(PODS, headers=sa)).status_code == 500 and time.monotonic() < deadline:
            pass
        assert (await http.get(PODS, headers=sa)).status_code == normal
        assert (await http.post("/sim/apiserver/faults", json={"kind": "418"})).status_code == 400


async def test_the_kube_client_waits_out_a_429_like_client_go(server: RunningApiServer, tmp_path: Path) -> None:
    """client-go sleeps Retry-After and sends a 429'd request again (up to 10 times); a 500
    without Retry-After is the caller's error at once."""
    kube = KubeClient(await new_api_client(str(write_kubeconfig(tmp_path / "kc", server.url))))
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            retries = {"code": "429", "verb": "GET", "host": urlsplit(server.url).netloc}
            before = REGISTRY.get_sample_value("rest_client_request_retries_total", retries) or 0.0
            await http.post("/sim/apiserver/faults", json={"kind": "429", "seconds": 1.5, "admin": True})
            started = time.monotonic()
            page = await kube.list_page(POD, namespace="default")  # before: KubeError 429
            assert page["items"] == [] and time.monotonic() - started >= 1.0
            served = (await http.get("/sim/apiserver/faults")).json()["served"]
            assert served["429"] >= 2  # one per Retry-After second
            # client-go's IncrementRetry: once per request sent again, with the code that made it
            retried = (REGISTRY.get_sample_value("rest_client_request_retries_total", retries) or 0.0) - before
            assert retried == served["429"]

            await http.post("/sim/apiserver/faults", json={"kind": "500", "seconds": 30, "admin": True})
            with pytest.raises(KubeError) as err:
                await kube.list_page(POD, namespace="default")
            assert err.value.code == 500
            assert (await http.get("/sim/apiserver/faults")).json()["served"]["500"] == 1
            await http.delete("/sim/apiserver/faults")
    finally:
        await kube.close()


def test_retry_after_follows_check_wait() -> None:
    assert retry_after(429, {"Retry-After": "1"}) == 1.0
    assert retry_after(503, {"Retry-After": "2"}) == 2.0
    assert retry_after(500, {}) is None  # a 5xx without Retry-After: not retried
    assert retry_after(429, {"Retry-After": "soon"}) is None
    assert retry_after(409, {"Retry-After": "1"}) is None
    assert retry_after(429, {"Retry-After": "3600"}) == 30.0
