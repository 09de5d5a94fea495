"""The simulated kubelet runs RayJob submitter containers as the Ray Job CLI would: KubeRay's exact
scripts (decisions/job/submitter.py) against the in-process simulated dashboards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from raybus.api.rayjob import RayJob
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.job.submitter import configure_submitter_container
from raybus_sim.apiserver import RunningApiServer
from raybus_sim.dashboard import ClusterSettings, DashboardRegistry

from .helpers import eventually

pytestmark = pytest.mark.integration
NS = "default"
CLUSTER = "c1"
ADDRESS = f"{CLUSTER}-head-svc.{NS}.svc.cluster.local:8265"
JOB_ID = "rj-abcde"
TAIL_LAG_S = 1.0  # the head closes the log tail this long after the job's end (real Ray: ~3 s)


@pytest.fixture
async def registry(server: RunningApiServer) -> AsyncIterator[DashboardRegistry]:
    reg = DashboardRegistry(defaults=ClusterSettings(job_pending_s=0.05, job_running_s=0.05,
                                                     log_tail_close_lag_s=TAIL_LAG_S))
    server.node.attach_dashboards(reg)  # HeadDashboardSync follows head Pods through the API
    yield reg


def _rayjob(entrypoint: str) -> RayJob:
    return RayJob.model_validate({"apiVersion": "ray.io/v1", "kind": "RayJob",
                                  "metadata": {"name": "rj", "namespace": NS, "uid": "u1"},
                                  "spec": {"entrypoint": entrypoint}})


def _submitter(entrypoint: str, *, mode: str, container: dict[str, Any] | None = None) -> dict[str, Any]:
    """The submitter container KubeRay configures (configureSubmitterContainer)."""
    out = container or {"name": "ray-job-submitter", "image": "rayproject/ray:2.52.0"}
    configure_submitter_container(out, _rayjob(entrypoint), mode=mode, job_id=JOB_ID, dashboard_url=ADDRESS,
                                  cluster_name=CLUSTER, cluster_spec=None, settings=OperatorSettings())
    return out


async def _head(api: client.ApiClient, *, sidecar: dict[str, Any] | None = None) -> None:
    labels = {"ray.io/cluster": CLUSTER, "ray.io/node-type": "head"}
    ray = {"name": "ray-head", "image": "rayproject/ray:2.52.0",
           "readinessProbe": {"exec": {"command": ["true"]}}}
    spec: dict[str, Any] = {"containers": [ray, *([sidecar] if sidecar else [])]}
    if sidecar:
        spec["restartPolicy"] = "Never"
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(NS, {"metadata": {"name": f"{CLUSTER}-head", "labels": labels}, "spec": spec})
    await core.create_namespaced_service(NS, {"metadata": {"name": f"{CLUSTER}-head-svc"}, "spec": {
        "selector": labels, "ports": [{"name": "dashboard", "port": 8265}]}})


async def _submitter_job(api: client.ApiClient, container: dict[str, Any], *, backoff: int = 2) -> None:
    await client.BatchV1Api(api).create_namespaced_job(NS, {"metadata": {"name": "rj"}, "spec": {
        "backoffLimit": backoff, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}})


async def _job_condition(api: client.ApiClient) -> str:
    async def done() -> str | None:
        job = await client.BatchV1Api(api).read_namespaced_job("rj", NS)
        return next((c.type for c in job.status.conditions or []
                     if c.type in ("Complete", "Failed") and c.status == "True"), None)

    return await eventually(done, timeout=10)


async def _up(registry: DashboardRegistry) -> None:
    async def up() -> bool:
        return registry.is_up(NS, CLUSTER)

    await eventually(up)


async def _submitter_pods(api: client.ApiClient) -> list[client.V1Pod]:
    pods = (await client.CoreV1Api(api).list_namespaced_pod(NS)).items
    return [p for p in pods if any(r.kind == "Job" for r in p.metadata.owner_references or [])]


def _submissions(registry: DashboardRegistry) -> int:
    state = registry.get(NS, CLUSTER)
    return state.requests["submitter POST /api/jobs/"] if state is not None else 0


@pytest.mark.parametrize(("entrypoint", "condition", "outcome"), [
    ("python /home/ray/samples/sample_code.py", "Complete", "SUCCEEDED"),
    ("python -c 'import sys; sys.exit(1)'", "Complete", "FAILED"),
])
async def test_k8s_job_mode_submits_once_and_follows_to_the_end(
        api: client.ApiClient, registry: DashboardRegistry, entrypoint: str, condition: str, outcome: str) -> None:
    await _head(api)
    await _up(registry)
    await _submitter_job(api, _submitter(entrypoint, mode="K8sJobMode"), backoff=1)
    assert await _job_condition(api) == condition
    state = registry.get(NS, CLUSTER)
    assert state is not None
    job = state.jobs.find(JOB_ID, registry.clock())
    assert job is not None and job.status_at(registry.clock())[0] == outcome
    end = job.status_at(registry.clock())[1]
    assert end is not None and registry.clock() - end >= TAIL_LAG_S  # `ray job logs --follow` ended with the tail
    assert job.entrypoint == entrypoint.replace("'", '"')  # the CLI re-quotes the words (list2cmdline)
    # Ray 2.60's `ray job logs --follow` exits 0 whatever the job's end (cli.py `logs` never calls
    # sys.exit), so even a FAILED Ray job leaves one Succeeded submitter pod: the RayJob learns
    # the outcome from the dashboard, not from the submitter Job.
    pods = await _submitter_pods(api)
    assert [p.status.phase for p in pods] == ["Succeeded"]
    assert _submissions(registry) == 1 and state.requests["POST /api/jobs/"] == 0  # gateway counters untouched


async def test_an_existing_submission_is_followed_not_resubmitted(
        api: client.ApiClient, registry: DashboardRegistry) -> None:
    await _head(api)
    await _up(registry)
    state = registry.get(NS, CLUSTER)
    assert state is not None
    state.job_plans[JOB_ID] = {"running_s": 0.5}
    from raybus_sim.dashboard.handlers import submit_body
    assert submit_body(state, {"entrypoint": "sleep 1", "submission_id": JOB_ID}, now=registry.clock()).status == 200
    await _submitter_job(api, _submitter("sleep 1", mode="K8sJobMode"))
    assert await _job_condition(api) == "Complete"
    assert _submissions(registry) == 0 and state.requests["submitter GET /api/jobs/{id}"] == 1


async def test_submitter_waits_for_the_gcs_then_submits_once(
        api: client.ApiClient, registry: DashboardRegistry) -> None:
    """v1.7 (kuberay#4468): every mode waits for the dashboard's GCS (python urllib) before `ray job
    status`, so a head that is not there yet neither fails the submitter nor burns its retries."""
    await _submitter_job(api, _submitter("sleep 0.2", mode="K8sJobMode"), backoff=0)

    async def running() -> bool:
        return [p.status.phase for p in await _submitter_pods(api)] == ["Running"]

    await eventually(running, timeout=10)  # the script is in its wait loop: no head, no Service
    await _head(api)
    assert await _job_condition(api) == "Complete"
    assert [p.status.phase for p in await _submitter_pods(api)] == ["Succeeded"]
    state = registry.get(NS, CLUSTER)
    assert state is not None and state.requests["submitter GET /api/gcs_healthz"] >= 1
    assert _submissions(registry) == 1


@pytest.mark.parametrize(("entrypoint", "exit_code"), [("sleep 0.2", 0), ("exit 3", 1), ("sleep 30", 0)])
async def test_sidecar_waits_for_its_head_submits_on_localhost_and_exits_with_the_job(
        api: client.ApiClient, registry: DashboardRegistry, entrypoint: str, exit_code: int) -> None:
    """A waiting `ray job submit` exits 1 only when the job FAILED (Ray 2.60 cli.py `submit`):
    a STOPPED job (the `sleep 30` one, stopped through the dashboard) exits 0."""
    await _head(api, sidecar=_submitter(entrypoint, mode="SidecarMode"))
    core = client.CoreV1Api(api)
    if entrypoint == "sleep 30":
        async def running() -> bool:
            state = registry.get(NS, CLUSTER)
            job = state.jobs.find(JOB_ID, registry.clock()) if state is not None else None
            return job is not None and job.status_at(registry.clock())[0] == "RUNNING"

        await eventually(running, timeout=10)
        state = registry.get(NS, CLUSTER)
        job = state.jobs.find(JOB_ID, registry.clock()) if state is not None else None
        assert job is not None
        job.stop_at = registry.clock()

    async def terminated() -> Any:
        pod = await core.read_namespaced_pod(f"{CLUSTER}-head", NS)
        status = next((c for c in pod.status.container_statuses or [] if c.name == "ray-job-submitter"), None)
        return pod if status is not None and status.state.terminated is not None else None

    pod = await eventually(terminated, timeout=10)
    side = next(c for c in pod.status.container_statuses if c.name == "ray-job-submitter")
    assert side.state.terminated.exit_code == exit_code and side.restart_count == 0
    # The Ray container still runs: the Pod is Running (not Ready) and its dashboard still answers.
    assert pod.status.phase == "Running" and registry.is_up(NS, CLUSTER)
    assert _submissions(registry) == 1


async def test_light_weight_submitter_image(api: client.ApiClient, registry: DashboardRegistry) -> None:
    """ray-job.light-weight-submitter.yaml: `/submitter` with the entrypoint as args, address and
    submission id from the env KubeRay sets."""
    await _head(api)
    await _up(registry)
    custom = {"name": "my-custom-rayjob-submitter", "image": "quay.io/kuberay/submitter:v1.5.1",
              "command": ["/submitter"], "args": ["--runtime-env-json", '{"pip":["requests==2.26.0"]}', "--",
                                                  "python", "/home/ray/samples/sample_code.py"]}
    await _submitter_job(api, _submitter("ignored", mode="K8sJobMode", container=custom))
    assert await _job_condition(api) == "Complete"
    state = registry.get(NS, CLUSTER)
    assert state is not None
    job = state.jobs.find(JOB_ID, registry.clock())
    assert job is not None and job.entrypoint == "python /home/ray/samples/sample_code.py"
    assert job.runtime_env == {"pip": ["requests==2.26.0"]}
