"""Job ends pushed by the head, end to end on the local stack: `raybus up`'s stack turns the push on,
the cluster-reconciler gives the head Pod the export env, the simulated head pushes the job
supervisor's death 0.3 s after the job's end_time (as a real Ray 2.60 head does with that env), and
the HTTPMode RayJob ends well before the head would close the job's log tail (3 s after end_time,
as a real head does), which is all it had before."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.e2e.conftest import NS, Kube
from tests.integration.e2e.rayjob_kit import SAMPLE, Jobs, rayjob_doc, status

pytestmark = pytest.mark.integration


@pytest.fixture
async def jobs(kube: Kube) -> AsyncIterator[Jobs]:
    j = Jobs(kube)
    await j.prerequisites(SAMPLE)
    yield j
    await j.delete_all()


async def test_an_http_mode_job_end_is_pushed_by_its_head(jobs: Jobs) -> None:
    name = await jobs.apply(rayjob_doc(name="e2e-http-pushed", submissionMode="HTTPMode", entrypoint="sleep 4"))
    st = status(await jobs.wait_status(name, "Running", "RUNNING", timeout=90))
    cluster = st["rayClusterName"]
    head = (await jobs.kube.pods(cluster, node_type="head"))[0]
    env = {e["name"]: e.get("value", "") for e in head["spec"]["containers"][0].get("env", [])}
    addr = env.get("RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR", "")
    assert addr.startswith("http://127.0.0.1:") and f"/v1/ray-events/{NS}/{cluster}/" in addr, env
    await jobs.wait_status(name, "Complete", "SUCCEEDED", timeout=60)
    seen_at = time.time()
    async with httpx.AsyncClient() as http:
        info = (await http.get(f"{jobs.kube.stack.dashboard_url}/{NS}/{cluster}/api/jobs/{st['jobId']}")).json()
    latency = seen_at - info["end_time"] / 1000
    print(f"\nlocal stack, pushed: HTTPMode job end_time -> RayJob SUCCEEDED {latency:.2f} s")
    assert 0 < latency < 2.5, latency  # the log tail closes only 3 s after end_time
    log = (jobs.kube.stack.home / "logs" / "dashboard-poller.log").read_text()
    assert "pushed by the head" in log and "wrong token" not in log
