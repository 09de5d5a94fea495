"""Helpers of the RayJob end-to-end tests: what a user does (apply, patch, delete, submit to the
dashboard by hand in InteractiveMode), what a user reads (status, submitter Jobs, clusters) and
what a test must count (every RayCluster / submitter Job ever created, submissions per head)."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from raybus.adapters.kube import KubeClient, KubeError, Resource, UnknownResource, resource_for
from tests.integration.e2e.conftest import NS, REPO, Kube, WatchRecorder

Json = dict[str, Any]
RJ = resource_for("ray.io/v1", "RayJob")
RC = resource_for("ray.io/v1", "RayCluster")
BATCH_JOB = resource_for("batch/v1", "Job")
SAMPLE = REPO / "deploy/samples/ray-job.sample.yaml"
ORIGIN = "ray.io/originated-from-cr-name"
TERMINAL = ("Complete", "Failed")


def docs(path: Path) -> list[Json]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def rayjob_doc(path: Path = SAMPLE, name: str | None = None, **spec: Any) -> Json:
    """The file's RayJob, renamed, with `spec` fields (camelCase) overridden."""
    doc = copy.deepcopy(next(d for d in docs(path) if d.get("kind") == "RayJob"))
    meta = doc.setdefault("metadata", {})
    if name is not None:
        meta.pop("generateName", None)
        meta["name"] = name
    meta["namespace"] = NS
    doc["spec"].update(spec)
    return doc


def status(job: Json) -> Json:
    return job.get("status") or {}


def jds(job: Json) -> str:
    return str(status(job).get("jobDeploymentStatus") or "")


class Jobs:
    """RayJobs of one test: created through the API, deleted at the end."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.c: KubeClient = kube.c
        self.created: list[str] = []

    async def prerequisites(self, path: Path) -> None:
        """The file's other objects (the sample's ConfigMap with sample_code.py, ...)."""
        for doc in docs(path):
            if str(doc.get("apiVersion", "")).startswith("ray.io/"):
                continue
            try:
                res = resource_for(doc["apiVersion"], doc["kind"])
            except UnknownResource:
                continue  # e.g. Volcano's Queue: no such CRD here (reported by the samples test)
            body = copy.deepcopy(doc)
            body.setdefault("metadata", {})["namespace"] = NS
            with contextlib.suppress(KeyError):
                body["metadata"].pop("resourceVersion")
            try:
                await self.c.create(res, body, namespace=NS if res.namespaced else None)
            except KubeError as exc:
                if not exc.already_exists:
                    raise

    async def apply(self, doc: Json) -> str:
        created = await self.c.create(RJ, doc, namespace=NS)
        name = str(created["metadata"]["name"])
        self.created.append(name)
        return name

    async def get(self, name: str) -> Json:
        return await self.c.get(RJ, namespace=NS, name=name)

    async def patch(self, name: str, patch: Json) -> Json:
        return await self.c.merge_patch(RJ, namespace=NS, name=name, patch=patch)

    async def wait(self, name: str, pred: Callable[[Json], bool], *, timeout: float = 60.0,
                   what: str = "condition") -> Json:
        seen: list[Json] = []

        async def check() -> bool:
            job = await self.get(name)
            seen[:] = [job]
            return pred(job)

        try:
            await self.kube.eventually(check, timeout=timeout, what=f"RayJob {name}: {what}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last status {status(seen[0]) if seen else None}") from None
        return seen[0]

    async def wait_status(self, name: str, deployment: str, job_status: str | None = None, *,
                          timeout: float = 60.0) -> Json:
        return await self.wait(
            name, lambda j: jds(j) == deployment and (job_status is None or status(j).get("jobStatus") == job_status),
            timeout=timeout, what=f"{deployment}/{job_status}")

    async def gone(self, name: str, *, timeout: float = 30.0) -> None:
        async def check() -> bool:
            try:
                await self.get(name)
            except KubeError as exc:
                return exc.not_found
            return False

        await self.kube.eventually(check, timeout=timeout, what=f"RayJob {name} deleted")

    async def clusters(self, name: str) -> list[Json]:
        items, _ = await self.c.list_all(RC, namespace=NS, label_selector=f"{ORIGIN}={name}")
        return items

    async def cluster(self, name: str) -> Json | None:
        return await self._get_or_none(RC, name)

    async def submitter(self, name: str) -> Json | None:
        return await self._get_or_none(BATCH_JOB, name)

    async def _get_or_none(self, res: Resource, name: str) -> Json | None:
        try:
            return await self.c.get(res, namespace=NS, name=name)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    async def requests(self, cluster: str) -> dict[str, int]:
        """The simulated head's request counters (the dashboard gateway's and the submitters')."""
        async with httpx.AsyncClient() as http:
            r = await http.get(f"{self.kube.stack.sim_url}/sim/dashboards/{NS}/{cluster}/requests")
            return dict(r.json()) if r.status_code == 200 else {}

    async def submissions(self, cluster: str) -> int:
        """POST /api/jobs/ to one head: HTTPMode's (by the dashboard-poller) plus the submitters'."""
        counts = await self.requests(cluster)
        return counts.get("POST /api/jobs/", 0) + counts.get("submitter POST /api/jobs/", 0)

    async def submit_by_hand(self, cluster: str, job_id: str, entrypoint: str) -> None:
        """InteractiveMode: the user submits to the dashboard themselves."""
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{self.kube.stack.dashboard_url}/{NS}/{cluster}/api/jobs/",
                                json={"entrypoint": entrypoint, "submission_id": job_id})
            r.raise_for_status()

    async def delete_all(self) -> None:
        for name in self.created:
            with contextlib.suppress(KeyError, KubeError):
                await self.c.delete(RJ, namespace=NS, name=name)


async def hold_readiness(kube: Kube, selector: str) -> int:
    """Keep matching Pods not Ready (the simulated kubelet's readiness hold); returns its id."""
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{kube.stack.sim_url}/sim/readiness-holds", json={"labelSelector": selector})
        r.raise_for_status()
        return int(r.json()["id"])


async def release_readiness(kube: Kube, hold: int) -> None:
    async with httpx.AsyncClient() as http:
        (await http.delete(f"{kube.stack.sim_url}/sim/readiness-holds/{hold}")).raise_for_status()


class Ledger(WatchRecorder):
    """Every object of one kind ever ADDED (from a watch started before the test applies
    anything): a duplicate create shows here even if it was deleted again later."""

    def __init__(self, client: KubeClient, res: Resource, *, label_selector: str | None = None) -> None:
        super().__init__(client, res, label_selector=label_selector)
        self.added: dict[str, list[str]] = {}  # name -> uids (a name created twice has two)
        self.deleted_at: dict[str, float] = {}

    def record(self, event_type: str, meta: dict[str, Any]) -> None:
        name = str(meta.get("name") or "")
        if event_type == "ADDED":
            self.added.setdefault(name, []).append(str(meta.get("uid")))
        elif event_type == "DELETED":
            self.deleted_at.setdefault(name, time.time())

    def with_prefix(self, prefix: str) -> dict[str, list[str]]:
        return {n: uids for n, uids in self.added.items() if n.startswith(prefix)}
