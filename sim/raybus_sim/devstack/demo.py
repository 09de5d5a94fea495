"""`raybus up --demo`: apply the sample RayCluster and follow it until it is ready, then the sample
RayJob (and the ConfigMap with its sample_code.py) and follow it to Complete/SUCCEEDED, printing
each jobDeploymentStatus/jobStatus transition, then the sample RayService and follow it to Ready
(both Serve apps RUNNING, the serve Service with endpoints), printing each status transition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes_asyncio import client, config, watch

SAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "samples"
SAMPLE = SAMPLES / "ray-cluster.sample.yaml"
JOB_SAMPLE = SAMPLES / "ray-job.sample.yaml"
SERVICE_SAMPLE = SAMPLES / "ray-service.sample.yaml"
TERMINAL = ("Complete", "Failed", "ValidationFailed")
T = TypeVar("T")


def follow_sample(*, kubeconfig: Path, timeout_s: float = 120.0) -> bool:
    return run_interruptible(_follow(kubeconfig=kubeconfig, timeout_s=timeout_s))


def run_interruptible(main: Coroutine[Any, Any, T], *, cleanup_s: float = 2.0) -> T:
    """asyncio.run, except that a KeyboardInterrupt (`raybus up`'s Ctrl-C and SIGTERM) gives the
    main task `cleanup_s` to close its connections and then leaves: asyncio.run waits for every
    task it cancels, so one that loses its cancel would hold `make run` after Ctrl-C forever."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(main)
    try:
        return loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        loop.run_until_complete(asyncio.wait([task], timeout=cleanup_s))
        raise
    finally:
        loop.close()


def _pod_line(pod: Any) -> str:
    ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
    return f"{pod.metadata.name}:{pod.status.phase}{'/Ready' if ready else ''}"


async def _follow(*, kubeconfig: Path, timeout_s: float) -> bool:
    await config.load_kube_config(config_file=str(kubeconfig))
    async with client.ApiClient() as api:
        try:
            return (await _follow_cluster(api, timeout_s=timeout_s)
                    and await _follow_job(api, timeout_s=timeout_s)
                    and await _follow_service(api, timeout_s=timeout_s))
        except TimeoutError as exc:  # a sample of an earlier run that would not go away
            print(f"demo: {exc}", flush=True)
            return False


async def _create(what: str, create: Any) -> None:
    try:
        await create
        print(f"demo: applied {what}", flush=True)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        print(f"demo: {what} already exists", flush=True)


def left_unfinished(kind: str, obj: dict[str, Any]) -> str:
    """Why a sample left by an earlier run cannot get anywhere now ('' if it still can).

    A RayJob that did not reach Complete/SUCCEEDED then never will: a terminal state is final
    (KubeRay never leaves Failed/ValidationFailed), and a Ray job still pending or running then ran
    on a head of the earlier run: `make run` restarts the whole simulated cluster, Ray heads and
    their jobs included, so it ends Failed (SubmissionFailed, or JobDeploymentStatusTransition-
    GracePeriodExceeded once the head answers without it). RayClusters and RayServices have no such
    end state: they converge again on their own."""
    status = obj.get("status") or {}
    if kind == "RayJob":
        deployment = status.get("jobDeploymentStatus") or "New"
        if not (deployment == "Complete" and status.get("jobStatus") == "SUCCEEDED"):
            return (f"jobDeploymentStatus={deployment} jobStatus={status.get('jobStatus') or '-'}"
                    f" reason={status.get('reason') or '-'}")
    return ""


async def _apply_ray(custom: client.CustomObjectsApi, doc: dict[str, Any], *, source: str,
                     timeout_s: float = 60.0) -> tuple[str, str]:
    """Create one ray.io/v1 object of a sample; returns its namespace and name. One from an earlier
    run is kept, unless it was left unfinished: then it is deleted (and its dependents with it, in the
    foreground, so the new one's submitter Job does not meet the old one's) and applied afresh."""
    kind, name = str(doc["kind"]), str(doc["metadata"]["name"])
    ns = str(doc["metadata"].get("namespace", "default"))
    plural = f"{kind.lower()}s"
    try:
        old = await custom.get_namespaced_custom_object("ray.io", "v1", ns, plural, name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        old = None
    why = left_unfinished(kind, old) if old else ""
    if why:
        print(f"demo: {kind} {ns}/{name} from an earlier run did not finish ({why}); deleting it to "
              "start afresh", flush=True)
        await _delete_and_wait(custom, ns, plural, name, timeout_s=timeout_s)
    await _create(f"{kind} {ns}/{name} from {source}",
                  custom.create_namespaced_custom_object("ray.io", "v1", ns, plural, doc))
    return ns, name


async def _delete_and_wait(custom: client.CustomObjectsApi, ns: str, plural: str, name: str, *,
                           timeout_s: float) -> None:
    body = client.V1DeleteOptions(propagation_policy="Foreground")
    deadline = time.monotonic() + timeout_s
    try:
        await custom.delete_namespaced_custom_object("ray.io", "v1", ns, plural, name, body=body)
        while time.monotonic() < deadline:
            await custom.get_namespaced_custom_object("ray.io", "v1", ns, plural, name)
            await asyncio.sleep(0.2)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        return
    raise TimeoutError(f"{plural} {ns}/{name} still there {timeout_s:.0f}s after its deletion")


async def _follow_cluster(api: client.ApiClient, *, timeout_s: float) -> bool:
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    ns, name = await _apply_ray(custom, yaml.safe_load(SAMPLE.read_text()), source=SAMPLE.name)
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        rc = await custom.get_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", name)
        status = rc.get("status") or {}
        pods = await core.list_namespaced_pod(ns, label_selector=f"ray.io/cluster={name}")
        line = (f"state={status.get('state', '-')} ready_workers="
                f"{status.get('readyWorkerReplicas', 0)}/{status.get('desiredWorkerReplicas', '?')} "
                f"pods=[{', '.join(sorted(_pod_line(p) for p in pods.items))}]")
        if line != last:
            print(f"demo: {line}", flush=True)
            last = line
        if status.get("state") == "ready":
            print(f"demo: RayCluster {ns}/{name} is ready "
                  f"(head {status.get('head', {}).get('podName', '?')})", flush=True)
            return True
        await asyncio.sleep(0.5)
    print(f"demo: RayCluster {ns}/{name} not ready after {timeout_s:.0f}s", flush=True)
    return False


async def _follow_job(api: client.ApiClient, *, timeout_s: float) -> bool:
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    docs = [d for d in yaml.safe_load_all(JOB_SAMPLE.read_text()) if isinstance(d, dict)]
    job = next(d for d in docs if d.get("kind") == "RayJob")
    ns = job["metadata"].get("namespace", "default")
    for cm in (d for d in docs if d.get("kind") == "ConfigMap"):  # sample_code.py, mounted by the head
        body: Any = cm
        await _create(f"ConfigMap {ns}/{cm['metadata']['name']}", core.create_namespaced_config_map(ns, body))
    ns, name = await _apply_ray(custom, job, source=JOB_SAMPLE.name)
    try:
        async with asyncio.timeout(timeout_s):  # not wait_for: it can lose a cancel (gh-86296)
            return await _watch_job(custom, ns, name)
    except TimeoutError:
        print(f"demo: RayJob {ns}/{name} not finished after {timeout_s:.0f}s", flush=True)
        return False


async def _watch_job(custom: client.CustomObjectsApi, ns: str, name: str) -> bool:
    """Every status the RayJob goes through (a watch, so no transition is missed)."""
    last = ""
    while True:
        async with watch.Watch() as w:  # closes the response when we stop reading (no unclosed session)
            async for event in w.stream(custom.list_namespaced_custom_object, "ray.io", "v1", ns, "rayjobs",
                                        field_selector=f"metadata.name={name}", timeout_seconds=60):
                status = (event["object"] or {}).get("status") or {}
                deployment = status.get("jobDeploymentStatus") or "New"
                line = (f"RayJob {name}: jobDeploymentStatus={deployment} "
                        f"jobStatus={status.get('jobStatus') or '-'} cluster={status.get('rayClusterName') or '-'}")
                if status.get("reason"):
                    line += f" reason={status['reason']}"
                if line != last:
                    print(f"demo: {line}", flush=True)
                    last = line
                if deployment in TERMINAL:
                    ok = deployment == "Complete" and status.get("jobStatus") == "SUCCEEDED"
                    print(f"demo: RayJob {ns}/{name} {'completed' if ok else 'did not succeed'}"
                          f" (submitter Job {name}, Ray job {status.get('jobId', '?')})", flush=True)
                    return ok


async def _follow_service(api: client.ApiClient, *, timeout_s: float) -> bool:
    custom = client.CustomObjectsApi(api)
    ns, name = await _apply_ray(custom, yaml.safe_load(SERVICE_SAMPLE.read_text()), source=SERVICE_SAMPLE.name)
    try:
        async with asyncio.timeout(timeout_s):
            return await _watch_service(api, ns, name)
    except TimeoutError:
        print(f"demo: RayService {ns}/{name} not ready after {timeout_s:.0f}s", flush=True)
        return False


def _service_line(name: str, status: dict[str, Any]) -> str:
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready, upgrade = conditions.get("Ready") or {}, conditions.get("UpgradeInProgress") or {}
    active = status.get("activeServiceStatus") or {}
    apps = ",".join(f"{app}={(s or {}).get('status')}" for app, s in sorted(
        (active.get("applicationStatuses") or {}).items())) or "-"
    return (f"RayService {name}: Ready={ready.get('status', '-')}/{ready.get('reason', '-')} "
            f"UpgradeInProgress={upgrade.get('status', '-')} "
            f"active={active.get('rayClusterName') or '-'} "
            f"pending={(status.get('pendingServiceStatus') or {}).get('rayClusterName') or '-'} "
            f"apps={apps} serveEndpoints={status.get('numServeEndpoints', 0)}")


async def _watch_service(api: client.ApiClient, ns: str, name: str) -> bool:
    custom = client.CustomObjectsApi(api)
    last = ""
    while True:
        async with watch.Watch() as w:  # closes the response when we stop reading
            async for event in w.stream(custom.list_namespaced_custom_object, "ray.io", "v1", ns, "rayservices",
                                        field_selector=f"metadata.name={name}", timeout_seconds=60):
                status = (event["object"] or {}).get("status") or {}
                line = _service_line(name, status)
                if line != last:
                    print(f"demo: {line}", flush=True)
                    last = line
                apps = ((status.get("activeServiceStatus") or {}).get("applicationStatuses") or {}).values()
                if status.get("serviceStatus") == "Running" and apps and all(
                        (a or {}).get("status") == "RUNNING" for a in apps):
                    svc = f"{name}-serve-svc"
                    print(f"demo: RayService {ns}/{name} is ready: Serve answers through Service {svc} "
                          f"({status.get('numServeEndpoints', 0)} endpoint(s)) on the RayCluster "
                          f"{(status.get('activeServiceStatus') or {}).get('rayClusterName')}", flush=True)
                    return True
