"""Issue 10's "done when" on the local stack, with the Serve cadence of docs/dashboard-poller.md:
with 6 running RayJobs (3 K8sJobMode, 3 HTTPMode, `sleep 900`) and 3 copies of the sample
RayService all Ready, the simulated heads count Serve status reads at no more than KubeRay's Serve
details cadence (every 2 s per RayService: 3 x 30 = 90/min) and every other request at most a
fifth of what KubeRay's fixed polling sends for them (GetJobInfo every 3 s per RayJob, proxy health
every 2 s per RayService: 6 x 20 + 3 x 30 = 210/min), and a job the simulator finishes shows
SUCCEEDED on its RayJob within 4 s, in either mode (K8sJobMode: the submitter container ends with
the job; HTTPMode: the head closes the log tail stream the dashboard-poller holds).

Only the dashboard gateway's requests count: the simulated heads count the submitter containers'
own (`ray job submit` following the job) under "submitter ..." keys. The measurement starts as soon
as everything is Ready (no settling time), over 30 s, compared per minute."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest

from raybus_sim.devstack.stack import LocalStack
from tests.integration.e2e.conftest import NS, Kube
from tests.integration.e2e.rayjob_kit import SAMPLE as JOB_SAMPLE
from tests.integration.e2e.rayjob_kit import Jobs, jds, rayjob_doc, status
from tests.integration.e2e.rayservice_kit import RS, Services, active_name, rayservice_doc
from tests.integration.e2e.rayservice_kit import SAMPLE as SERVICE_SAMPLE

# make test-long (a whole stack of its own and a minute of load).
pytestmark = pytest.mark.long

K8S = [f"load-k8s-{i}" for i in range(3)]
HTTP = [f"load-http-{i}" for i in range(3)]
SERVICES = [f"load-svc-{i}" for i in range(3)]
WINDOW_S = 30.0
SERVE_GET = "GET /api/serve/applications/"
KUBERAY_SERVE_PER_MIN = len(SERVICES) * 30  # 90
KUBERAY_OTHER_PER_MIN = len(K8S + HTTP) * 20 + len(SERVICES) * 30  # 210
JOB_END_LAG_S = 4.0


@pytest.fixture
async def objects(kube: Kube) -> AsyncIterator[tuple[Jobs, Services]]:
    jobs, services = Jobs(kube), Services(kube)
    await jobs.prerequisites(JOB_SAMPLE)
    yield jobs, services
    await jobs.delete_all()
    for name in services.created:
        with contextlib.suppress(Exception):
            await kube.c.delete(RS, namespace=NS, name=name)


async def raybus_requests(stack: LocalStack, clusters: list[str]) -> Counter[str]:
    """Requests the dashboard gateway sent to these heads (not the submitter containers'), per
    endpoint."""
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{stack.dashboard_url}/sim/dashboards/requests")
        r.raise_for_status()
        counts = r.json()
    total: Counter[str] = Counter()
    for c in clusters:
        total.update({key: n for key, n in counts.get(f"{NS}/{c}", {}).items()
                      if key != "total" and not key.startswith("submitter")})
    return total


async def test_a_fifth_of_kuberays_dashboard_load_and_job_ends_within_4s(
        objects: tuple[Jobs, Services], stack: LocalStack) -> None:
    jobs, services = objects
    for name in K8S + HTTP:
        mode = "K8sJobMode" if name in K8S else "HTTPMode"
        await jobs.apply(rayjob_doc(name=name, submissionMode=mode, entrypoint="sleep 900"))
    for name in SERVICES:
        await services.apply(rayservice_doc(SERVICE_SAMPLE, name))
    running = await asyncio.gather(*[jobs.wait_status(n, "Running", "RUNNING", timeout=120) for n in K8S + HTTP])
    ready = await asyncio.gather(*[services.wait_ready(n, timeout=120) for n in SERVICES])
    job_clusters = {n: status(j)["rayClusterName"] for n, j in zip(K8S + HTTP, running, strict=True)}
    heads = list(job_clusters.values()) + [active_name(rs) for rs in ready]

    before = await raybus_requests(stack, heads)
    started = time.monotonic()
    await asyncio.sleep(WINDOW_S)  # the measurement window
    spent = await raybus_requests(stack, heads) - before
    minutes = (time.monotonic() - started) / 60
    serve = spent[SERVE_GET] / minutes
    other = (sum(spent.values()) - spent[SERVE_GET]) / minutes
    print(f"raybus Serve {serve:.1f}/min vs KubeRay {KUBERAY_SERVE_PER_MIN}/min, other {other:.1f}/min vs "
          f"KubeRay {KUBERAY_OTHER_PER_MIN}/min: {dict(spent)}")
    # One Serve read per service every 2 s at most, and one more at each end of the window.
    assert spent[SERVE_GET] <= len(SERVICES) * (minutes * 30 + 2), f"Serve {serve:.0f}/min: {spent}"
    assert other <= KUBERAY_OTHER_PER_MIN / 5, f"{other:.0f}/min vs KubeRay's {KUBERAY_OTHER_PER_MIN}/min: {spent}"

    async def finish_and_time(name: str) -> float:
        st = status(await jobs.get(name))
        cluster, job_id = st["rayClusterName"], st["jobId"]
        async with httpx.AsyncClient() as http:
            r = await http.put(f"{stack.dashboard_url}/sim/dashboards/{NS}/{cluster}/jobs/{job_id}/plan",
                               json={"finish_now": True})
            r.raise_for_status()
        ended = time.monotonic()
        await jobs.wait(name, lambda j: status(j).get("jobStatus") == "SUCCEEDED", timeout=30,
                        what="jobStatus SUCCEEDED")
        return time.monotonic() - ended

    lags = dict(zip((K8S[0], HTTP[0]), await asyncio.gather(finish_and_time(K8S[0]), finish_and_time(HTTP[0])),
                    strict=True))
    print(f"job end -> RayJob SUCCEEDED: {lags}")
    assert all(lag <= JOB_END_LAG_S for lag in lags.values()), lags
    done = await asyncio.gather(*[jobs.wait_status(n, "Complete", "SUCCEEDED") for n in lags])
    assert all(jds(j) == "Complete" for j in done)
