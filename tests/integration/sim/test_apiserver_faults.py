"""The API server's fault switch (sim/raybus_sim/apiserver/faults.py), as the chaos soak uses it:
429 with Retry-After, 500 InternalError and a hang then 504 Timeout, for a ServiceAccount's
requests only, for a bounded time."""

from __future__ import annotations

import time

import httpx

from raybus_sim.apiserver import RunningApiServer
from raybus_sim.apiserver.auth import ADMIN_TOKEN

PODS = "/api/v1/namespaces/default/pods"


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
