"""KubeRay v1.7.0's `ray-operator/test/support` package, transcribed: the same objects
(NewRayClusterSpec, JobSubmitterPodTemplateApplyConfiguration, the `jobs` ConfigMap of scripts),
the same getters (RayJob, GetRayCluster, GetHeadPod, GetWorkerPods, Jobs, Pods) and Gomega's
Eventually / Consistently, over the Kubernetes API only.

Timeouts: the Go suite's TestTimeoutShort/Medium/Long (1, 2, 5 min) are kept as they are:
an Eventually only waits them out when it fails. Consistently (Gomega's default 30 s, which a
passing test always waits) is scaled by CONSISTENTLY_SCALE = 0.2 (6 s): the one scaling factor of
this suite.

The scripts: a real head runs `python /home/ray/jobs/<script>.py` from the ConfigMap; the
simulated head is told what that script does (RayHead below): counter.py succeeds, fail.py exits 1,
long_running.py runs 10000 s, long_running_counter.py 60 s, stop.py stops every job once its RayJob shows RUNNING (what its
20 s sleep is for)."""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import copy
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from raybus.adapters.kube import KubeClient, KubeError, Resource, new_api_client, resource_for

Json = dict[str, Any]
T = TypeVar("T")

TEST_TIMEOUT_SHORT = 60.0
TEST_TIMEOUT_MEDIUM = 120.0
TEST_TIMEOUT_LONG = 300.0
CONSISTENTLY_SCALE = 0.2
CONSISTENTLY = 30.0 * CONSISTENTLY_SCALE
# Gomega's polling interval: some Go assertions are a single read right after an Eventually (the
# RayCluster gone right after Complete), which a faster poll would race.
POLL = 1.0

RAY_VERSION = "2.55.0"
RAY_IMAGE = f"rayproject/ray:{RAY_VERSION}"
TESTDATA = Path(__file__).parent / "testdata"

RJ = resource_for("ray.io/v1", "RayJob")
RC = resource_for("ray.io/v1", "RayCluster")
RS = resource_for("ray.io/v1", "RayService")
POD = resource_for("v1", "Pod")
SVC = resource_for("v1", "Service")
CM = resource_for("v1", "ConfigMap")
SECRET = resource_for("v1", "Secret")
EVENT = resource_for("v1", "Event")
NAMESPACE = resource_for("v1", "Namespace")
BATCH_JOB = resource_for("batch/v1", "Job")
RESOURCE_QUOTA = Resource(group="", version="v1", plural="resourcequotas", kind="ResourceQuota")


def head_pod_template() -> Json:
    ports = [{"name": "gcs-server", "containerPort": 6379}, {"name": "serve", "containerPort": 8000},
             {"name": "dashboard", "containerPort": 8265}, {"name": "client", "containerPort": 10001}]
    return {"spec": {"containers": [{
        "name": "ray-head", "image": RAY_IMAGE, "ports": ports,
        "resources": {"requests": {"cpu": "300m", "memory": "1G"}, "limits": {"cpu": "500m", "memory": "2G"}}}]}}


def worker_pod_template() -> Json:
    return {"spec": {"containers": [{
        "name": "ray-worker", "image": RAY_IMAGE,
        "resources": {"requests": {"cpu": "300m", "memory": "1G"}, "limits": {"cpu": "500m", "memory": "1G"}}}]}}


def job_submitter_pod_template() -> Json:
    return {"spec": {"restartPolicy": "Never", "containers": [{
        "name": "ray-job-submitter", "image": RAY_IMAGE,
        "resources": {"requests": {"cpu": "200m", "memory": "200Mi"},
                      "limits": {"cpu": "500m", "memory": "500Mi"}}}]}}


def new_ray_cluster_spec(*, mount_jobs: bool = False) -> Json:
    """NewRayClusterSpec (+ MountConfigMap(jobs, "/home/ray/jobs") when `mount_jobs`)."""
    spec: Json = {
        "rayVersion": RAY_VERSION,
        "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": head_pod_template()},
        "workerGroupSpecs": [{"replicas": 1, "minReplicas": 1, "maxReplicas": 1, "groupName": "small-group",
                              "rayStartParams": {"num-cpus": "1"}, "template": worker_pod_template()}],
    }
    if mount_jobs:
        pod = spec["headGroupSpec"]["template"]["spec"]
        pod["containers"][0]["volumeMounts"] = [{"name": "jobs", "mountPath": "/home/ray/jobs"}]
        pod["volumes"] = [{"name": "jobs", "configMap": {"name": "jobs"}}]
    return spec


def jobs_config_map(namespace: str, *files: str) -> Json:
    """NewConfigMap(namespace, Files(test, ...)): immutable, binaryData."""
    data = {f: base64.b64encode((TESTDATA / f).read_bytes()).decode() for f in files}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "jobs", "namespace": namespace},
            "binaryData": data, "immutable": True}


def rayjob(name: str, namespace: str, **spec: Any) -> Json:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


COUNTER_RUNTIME_ENV = "\nenv_vars:\n  counter_name: test_counter\n"


def status(obj: Json) -> Json:
    return obj.get("status") or {}


def job_status(job: Json) -> str:
    return str(status(job).get("jobStatus") or "")


def deployment_status(job: Json) -> str:
    return str(status(job).get("jobDeploymentStatus") or "")


def reason(job: Json) -> str:
    return str(status(job).get("reason") or "")


def is_job_terminal(s: str) -> bool:
    return s in ("SUCCEEDED", "FAILED", "STOPPED")


def env_of(container: Json) -> dict[str, Json]:
    return {e["name"]: e for e in container.get("env") or []}


class E2E:
    """The Go suite's `test` (client, namespace) and `g` (Eventually, Consistently)."""

    def __init__(self, client: KubeClient, stack: Any, namespace: str) -> None:
        self.c = client
        self.stack = stack
        self.ns = namespace

    # -- writes ------------------------------------------------------------------------------
    async def apply(self, res: Resource, body: Json) -> Json:
        """Server-side apply with TestApplyOptions (FieldManager kuberay-test, Force)."""
        body = copy.deepcopy(body)
        body.setdefault("apiVersion", res.api_version)
        body.setdefault("kind", res.kind)
        body["metadata"].setdefault("namespace", self.ns)
        return await self.c.server_side_apply(res, body, namespace=self.ns, field_manager="kuberay-test",
                                              force=True)

    async def update(self, res: Resource, obj: Json) -> Json:
        """client-go's Update: a PUT carrying the read resourceVersion (409 if stale)."""
        meta = obj["metadata"]
        return await self.c._call("PUT", res.path(namespace=self.ns, name=meta["name"]), body=obj)

    async def delete(self, res: Resource, name: str) -> None:
        await self.c.delete(res, namespace=self.ns, name=name, propagation="Background")

    # -- reads -------------------------------------------------------------------------------
    async def get(self, res: Resource, name: str) -> Json:
        return await self.c.get(res, namespace=self.ns, name=name)

    async def get_or_none(self, res: Resource, name: str) -> Json | None:
        try:
            return await self.get(res, name)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    async def is_not_found(self, res: Resource, name: str) -> bool:
        return await self.get_or_none(res, name) is None

    async def list(self, res: Resource, selector: str | None = None) -> list[Json]:
        items, _ = await self.c.list_all(res, namespace=self.ns, label_selector=selector)
        return items

    async def rayjob(self, name: str) -> Json:
        return await self.get(RJ, name)

    async def raycluster(self, name: str) -> Json:
        return await self.get(RC, name)

    async def rayservice(self, name: str) -> Json:
        return await self.get(RS, name)

    async def jobs(self) -> builtins.list[Json]:
        """Jobs(test, namespace): the batch Jobs of the namespace."""
        return await self.list(BATCH_JOB)

    async def pods(self, selector: str) -> builtins.list[Json]:
        return await self.list(POD, selector)

    async def head_pod(self, cluster: Json | str) -> Json:
        """GetHeadPod: exactly one head Pod (RayClusterHeadPodsAssociationOptions), else an error."""
        name = cluster if isinstance(cluster, str) else cluster["metadata"]["name"]
        pods = await self.pods(f"ray.io/cluster={name},ray.io/node-type=head")
        if len(pods) != 1:
            raise AssertionError("number of head pods is not 1")
        return pods[0]

    async def worker_pods(self, cluster: Json | str) -> builtins.list[Json]:
        name = cluster if isinstance(cluster, str) else cluster["metadata"]["name"]
        return await self.pods(f"ray.io/cluster={name},ray.io/node-type=worker")

    async def events(self, name: str, reason_: str) -> builtins.list[Json]:
        return [e for e in await self.list(EVENT)
                if e.get("reason") == reason_ and (e.get("involvedObject") or {}).get("name") == name]

    # -- Gomega ------------------------------------------------------------------------------
    async def eventually(self, fetch: Callable[[], Awaitable[T]], pred: Callable[[T], bool], *,
                         timeout: float = TEST_TIMEOUT_SHORT, what: str = "") -> T:
        """g.Eventually(fetch, timeout).Should(pred): an API error counts as not yet."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = await fetch()
                if pred(last):
                    return last  # type: ignore[no-any-return]
            except (KubeError, AssertionError) as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise AssertionError(f"Eventually {what} timed out after {timeout}s; last: {_short(last)}")
            await asyncio.sleep(POLL)

    async def consistently(self, fetch: Callable[[], Awaitable[T]], pred: Callable[[T], bool], *,
                           duration: float = CONSISTENTLY, what: str = "") -> None:
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            value = await fetch()
            assert pred(value), f"Consistently {what} failed: {_short(value)}"
            await asyncio.sleep(POLL)

    async def rayjob_eventually(self, name: str, pred: Callable[[Json], bool], *,
                                timeout: float = TEST_TIMEOUT_SHORT, what: str = "") -> Json:
        return await self.eventually(lambda: self.rayjob(name), pred, timeout=timeout, what=f"RayJob {name} {what}")

    async def deployment_status_eventually(self, name: str, want: str, *,
                                           timeout: float = TEST_TIMEOUT_SHORT) -> Json:
        return await self.rayjob_eventually(name, lambda j: deployment_status(j) == want, timeout=timeout,
                                            what=f"jobDeploymentStatus == {want}")

    async def job_status_eventually(self, name: str, want: str, *, timeout: float = TEST_TIMEOUT_SHORT) -> Json:
        return await self.rayjob_eventually(name, lambda j: job_status(j) == want, timeout=timeout,
                                            what=f"jobStatus == {want}")

    # -- the simulated Ray head --------------------------------------------------------------
    async def sim(self, method: str, path: str, body: Json | None = None) -> Json:
        async with httpx.AsyncClient() as http:
            r = await http.request(method, f"{self.stack.sim_url}/sim/{path}", json=body)
            r.raise_for_status()
            return dict(r.json())

    async def dashboard(self, method: str, cluster: str, path: str, body: Json | None = None) -> httpx.Response:
        async with httpx.AsyncClient() as http:
            return await http.request(method, f"{self.stack.dashboard_url}/{self.ns}/{cluster}/{path}", json=body)


def _short(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, dict) and "metadata" in v for v in value):
        return f"{len(value)} objects: " + ", ".join(
            f"{v['metadata']['name']}{' (deleting)' if v['metadata'].get('deletionTimestamp') else ''}" for v in value)
    if isinstance(value, dict):
        return f"{(value.get('metadata') or {}).get('name')} status={value.get('status')}"
    return repr(value)[:2000]


SCRIPT_PLANS: dict[str, Json] = {
    "counter.py": {"outcome": "SUCCEEDED"},
    "fail.py": {"outcome": "FAILED", "exit_code": 1},
    "long_running.py": {"running_s": None},
    "stop.py": {"running_s": None},
    "long_running_counter.py": {"running_s": 60.0},
}


class RayHead:
    """What the scripts of the `jobs` ConfigMap do on a head. The simulated heads of the test's
    namespace are told each script's plan (PUT /sim/dashboards/{ns}/scripts): a submission whose
    entrypoint runs it starts with that plan, on whichever cluster, however late or early; stop.py
    then stops its own job once its RayJob shows RUNNING (what the script's 20 s sleep is for)."""

    def __init__(self, e: E2E) -> None:
        self.e = e
        self.stopped: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.e.sim("PUT", f"dashboards/{self.e.ns}/scripts",
                         {f"/home/ray/jobs/{name}": plan for name, plan in SCRIPT_PLANS.items()})
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(KubeError, httpx.HTTPError):
                for job in await self.e.list(RJ):
                    await self._stop_py(job)
            await asyncio.sleep(0.1)

    async def _stop_py(self, job: Json) -> None:
        st = status(job)
        cluster, job_id = st.get("rayClusterName"), st.get("jobId")
        if "/home/ray/jobs/stop.py" not in str(job["spec"].get("entrypoint")) or st.get("jobStatus") != "RUNNING":
            return
        key = (str(cluster), str(job_id))
        if key not in self.stopped:
            r = await self.e.dashboard("POST", str(cluster), f"api/jobs/{job_id}/stop")
            if r.status_code == 200:
                self.stopped.add(key)


@pytest.fixture
async def e2e(stack: Any) -> AsyncIterator[E2E]:
    """test.NewTestNamespace(): a namespace of its own per test, deleted at the end."""
    client = KubeClient(await new_api_client(str(stack.kubeconfig)))
    ns = f"test-ns-{uuid.uuid4().hex[:6]}"
    await client.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                        namespace=None)
    e = E2E(client, stack, ns)
    head = RayHead(e)
    await head.start()
    try:
        yield e
    finally:
        await head.stop()
        for res in (RJ, RS, RC):
            with contextlib.suppress(KubeError):
                for obj in await e.list(res):
                    await e.delete(res, obj["metadata"]["name"])
        with contextlib.suppress(KubeError):
            await client.delete(NAMESPACE, namespace=None, name=ns)
        await client.close()
