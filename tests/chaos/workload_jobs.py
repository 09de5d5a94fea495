"""The soak's RayJob and RayService workload (issue 22 item 2), beside soak.py's RayClusters.

RayJobs of every submission mode (K8sJobMode, HTTPMode, SidecarMode, InteractiveMode: the user
submits to the head and sets spec.jobId), some with shutdownAfterJobFinishes (+TTL), some failing
with backoffLimit retries (a new cluster per attempt), some deleted while running. RayServices
with serveConfigV2 changes (KubeRay updates the active cluster in place) and rayClusterConfig
changes (a new cluster, promoted once its apps run), some deleted. The simulated heads of these
clusters get the same HTTP faults as soak.py's (timeouts, garbage, resets), so the dashboard
writes run into them. Objects are named `wl-...`: soak.py's RayCluster workload (`soak-`) never
touches them. Checks after the faults: invariants_ray.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from raybus.adapters.kube import KubeError
from tests.integration.e2e import rayjob_kit as rj
from tests.integration.e2e import rayservice_kit as rs
from tests.integration.e2e.conftest import NS, Kube

PREFIX = "wl-"
MODES = ["K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode"]
HEAD_FAULTS = ["timeout", "invalid_json", "html_502", "reset"]
Json = dict[str, Any]


@dataclass
class JobPlan:
    """What the workload asked of one RayJob (the checks compare the end with it)."""

    mode: str
    fails: bool
    shutdown: bool
    ttl: int = 0
    backoff: int = 0
    deleted: bool = False


@dataclass
class RayWorkload:
    kube: Kube
    rng: random.Random
    on_fault: Callable[[str], None]  # soak.py's fault log (also moves its "last fault" time)
    jobs: dict[str, JobPlan] = field(default_factory=dict)
    services: dict[str, bool] = field(default_factory=dict)  # name -> deleted
    interactive_posted: set[str] = field(default_factory=set)  # the user's POST answered 200
    interactive_done: set[str] = field(default_factory=set)  # ... and spec.jobId set
    ops: dict[str, int] = field(default_factory=dict)
    serial: int = 0
    price: int = 3

    def _op(self, name: str) -> None:
        self.ops[name] = self.ops.get(name, 0) + 1

    def live_jobs(self) -> list[str]:
        return [n for n, p in self.jobs.items() if not p.deleted]

    def live_services(self) -> list[str]:
        return [n for n, deleted in self.services.items() if not deleted]

    async def prepare(self) -> None:
        """The RayJob sample's ConfigMap (its head and workers mount it)."""
        await rj.Jobs(self.kube).prerequisites(rj.SAMPLE)

    # --- workload ---------------------------------------------------------------------------
    async def run(self, until: float) -> None:
        await self.prepare()
        faults = asyncio.create_task(self._head_faults(until))
        try:
            while time.monotonic() < until:
                try:
                    await self._step()
                except (KubeError, httpx.HTTPError, OSError) as err:
                    self._op(f"error:{type(err).__name__}")  # the API server may be down (a fault)
                await asyncio.sleep(self.rng.uniform(1.0, 3.0))
        finally:
            faults.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await faults

    async def user_actions(self) -> None:
        """What a user keeps doing after the workload stops (the soak's convergence wait):
        InteractiveMode submissions, again if a head lost them."""
        with contextlib.suppress(KubeError, httpx.HTTPError, OSError):
            await self._interactive_submissions()

    async def _step(self) -> None:
        await self._interactive_submissions()
        running = await self._active_jobs()
        roll = self.rng.random()
        finished = [n for n in self.live_jobs() if n not in running]
        if len(finished) > 4:  # keep the machine's load flat: a user cleaning up finished RayJobs
            name = self.rng.choice(finished)
            await self.kube.c.delete(rj.RJ, namespace=NS, name=name)
            self.jobs[name].deleted = True
            self._op("rayjob delete (finished)")
        elif len(running) < 3 or (roll < 0.2 and len(running) < 5):
            await self._new_job()
        elif len(self.live_services()) < 2 or (roll < 0.3 and len(self.live_services()) < 3):
            await self._new_service()
        elif roll < 0.5 and self.live_services():
            await self._serve_config_change(self.rng.choice(self.live_services()))
        elif roll < 0.65 and self.live_services():
            await self._cluster_upgrade(self.rng.choice(self.live_services()))
        elif roll < 0.8 and running:
            name = self.rng.choice(running)
            await self.kube.c.delete(rj.RJ, namespace=NS, name=name)
            self.jobs[name].deleted = True
            self._op("rayjob delete (running)")
        elif roll < 0.88 and len(self.live_services()) > 1:
            name = self.rng.choice(self.live_services())
            await self.kube.c.delete(rs.RS, namespace=NS, name=name)
            self.services[name] = True
            self._op("rayservice delete")

    async def _active_jobs(self) -> list[str]:
        out = []
        for name in self.live_jobs():
            with contextlib.suppress(KubeError):
                if rj.jds(await self.kube.c.get(rj.RJ, namespace=NS, name=name)) not in rj.TERMINAL:
                    out.append(name)
        return out

    async def _new_job(self) -> None:
        self.serial += 1
        mode = MODES[self.serial % len(MODES)]
        fails = self.rng.random() < 0.25
        plan = JobPlan(mode=mode, fails=fails, shutdown=self.rng.random() < 0.6)
        if plan.shutdown:
            plan.ttl = self.rng.choice([0, 0, 3])
        if fails and mode != "InteractiveMode":
            plan.backoff = 1  # KubeRay: a retry on a new cluster (and a new job id)
        name = f"{PREFIX}j{self.serial}-{mode[:3].lower()}"
        entry = "python -c 'import sys; sys.exit(1)'" if fails else f"python -c 'import time; time.sleep({self.rng.randint(3, 15)})'"
        spec: Json = {"submissionMode": mode, "entrypoint": entry,
                      "shutdownAfterJobFinishes": plan.shutdown, "backoffLimit": plan.backoff}
        if plan.shutdown:
            spec["ttlSecondsAfterFinished"] = plan.ttl
        if mode == "K8sJobMode":
            spec["submitterConfig"] = {"backoffLimit": 2}  # the submitter Job's own pod retries
        doc = rj.rayjob_doc(name=name, **spec)
        doc["spec"].pop("runtimeEnvYAML", None)
        doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = self.rng.randint(0, 1)
        await self.kube.c.create(rj.RJ, doc, namespace=NS)
        self.jobs[name] = plan
        self._op(f"rayjob create {mode}{' failing' if fails else ''}")

    async def _interactive_submissions(self) -> None:
        """InteractiveMode: once the RayJob waits with its cluster, submit by hand and set jobId."""
        for name in self.live_jobs():
            if self.jobs[name].mode != "InteractiveMode":
                continue
            if name in self.interactive_done:
                with contextlib.suppress(KubeError, httpx.HTTPError):
                    await self._resubmit_if_lost(name)
                continue
            with contextlib.suppress(KubeError):
                job = await self.kube.c.get(rj.RJ, namespace=NS, name=name)
                cluster = rj.status(job).get("rayClusterName")
                if rj.jds(job) != "Waiting" or not cluster:
                    continue
                job_id = f"{name}-by-hand"
                entry = "python -c 'import sys; sys.exit(1)'" if self.jobs[name].fails else "sleep 5"
                if name not in self.interactive_posted:  # (a head fault's sleep is 3 s: no lost answers)
                    async with httpx.AsyncClient(timeout=10.0) as http:
                        r = await http.post(f"{self.kube.stack.dashboard_url}/{NS}/{cluster}/api/jobs/",
                                            json={"entrypoint": entry, "submission_id": job_id})
                    if r.status_code != 200:
                        continue  # a faulted head (or not up yet): the user tries again later
                    self.interactive_posted.add(name)
                await self.kube.c.merge_patch(rj.RJ, namespace=NS, name=name, patch={"spec": {"jobId": job_id}})
                self.interactive_done.add(name)
                self._op("rayjob interactive submit")

    async def _resubmit_if_lost(self, name: str) -> None:
        """The head restarted (a kube-sim restart restarts every simulated head) and lost the
        user's job: KubeRay v1.7 resubmits only in HTTPMode; in InteractiveMode the RayJob waits
        on a job that is gone, so the user submits it again (same id, a new head session: counted
        as a resubmission after a head restart, not a breach)."""
        job = await self.kube.c.get(rj.RJ, namespace=NS, name=name)
        cluster, job_id = rj.status(job).get("rayClusterName"), f"{name}-by-hand"
        if rj.jds(job) in rj.TERMINAL or not cluster:
            return
        base = f"{self.kube.stack.dashboard_url}/{NS}/{cluster}/api/jobs/"
        async with httpx.AsyncClient(timeout=10.0) as http:
            if (await http.get(base + job_id)).status_code != 404:  # known, or a fault: not a loss
                return
            entry = "python -c 'import sys; sys.exit(1)'" if self.jobs[name].fails else "sleep 5"
            if (await http.post(base, json={"entrypoint": entry, "submission_id": job_id})).status_code == 200:
                self._op("rayjob interactive resubmit (head lost it)")

    async def _new_service(self) -> None:
        self.serial += 1
        name = f"{PREFIX}s{self.serial}"
        doc = rs.rayservice_doc(rs.SAMPLE, name)
        # KubeRay's default keeps an upgraded-away cluster 60 s; a short delay lets the soak see
        # it deleted before the end.
        doc["spec"]["rayClusterDeletionDelaySeconds"] = 5
        await self.kube.c.create(rs.RS, doc, namespace=NS)
        self.services[name] = False
        self._op("rayservice create")

    async def _serve_config_change(self, name: str) -> None:
        """serveConfigV2 only: KubeRay updates the active cluster in place (no new cluster)."""
        svc = await self.kube.c.get(rs.RS, namespace=NS, name=name)
        config = str(svc["spec"]["serveConfigV2"])
        self.price += 1
        old = next(line for line in config.splitlines() if "price:" in line)
        new = old.split("price:")[0] + f"price: {self.price}"
        await self.kube.c.merge_patch(rs.RS, namespace=NS, name=name,
                                      patch={"spec": {"serveConfigV2": config.replace(old, new, 1)}})
        self._op("rayservice serveConfigV2 change")

    async def _cluster_upgrade(self, name: str) -> None:
        """A head env change: a new RayCluster, promoted when its apps run, the old one deleted."""
        svc = await self.kube.c.get(rs.RS, namespace=NS, name=name)
        head = svc["spec"]["rayClusterConfig"]["headGroupSpec"]
        container = head["template"]["spec"]["containers"][0]
        self.serial += 1
        container["env"] = [e for e in container.get("env") or [] if e.get("name") != "UPGRADE"] + [
            {"name": "UPGRADE", "value": str(self.serial)}]
        await self.kube.c.merge_patch(rs.RS, namespace=NS, name=name,
                                      patch={"spec": {"rayClusterConfig": {"headGroupSpec": head}}})
        self._op("rayservice cluster upgrade")

    # --- faults on these heads --------------------------------------------------------------
    async def _head_faults(self, until: float) -> None:
        """soak.py's head faults pick `soak-` clusters; these pick the RayJob/RayService ones."""
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(6.0, 15.0))
            try:
                items, _ = await self.kube.c.list_all(rj.RC, namespace=NS)
            except (KubeError, httpx.HTTPError, OSError):
                continue
            names = [i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith(PREFIX)]
            if not names or time.monotonic() >= until:
                continue
            name, kind = self.rng.choice(names), self.rng.choice(HEAD_FAULTS)
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient() as http:
                    await http.post(f"{self.kube.stack.dashboard_url}/sim/dashboards/{NS}/{name}/faults",
                                    json={"kind": kind, "count": self.rng.randint(1, 4), "sleep_s": 3.0})
                self.on_fault(f"{name}: {kind}")
