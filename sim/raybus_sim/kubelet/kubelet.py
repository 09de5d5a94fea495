"""Simulated scheduler+kubelet: binds pods to a fake node and walks them to Running/Ready.

An API client like kwok's nodes (client.py): it sees Pods through a watch and writes Node, Lease,
pods/binding, pods/status and the final delete, so the same node drives raybus's local API server
and a real kube-apiserver. The Job and EndpointSlice controllers are not here: they are the
control plane's (raybus_sim.controllers in the local server, kube-controller-manager in a real one).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from raybus.adapters.kube import KubeError
from raybus_sim.apiserver.defaults import now_rfc3339
from raybus_sim.apiserver.errors import ApiError
from raybus_sim.apiserver.selectors import Pred, compile_label_selector

from . import configrefs, faults
from .client import ClusterView, Obj, ObjEvent
from .podstate import ContainerSim, PodSim
from .redis_cleanup import RedisCleanupRunner
from .submitter import ContainerPrograms

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delays:
    schedule: float = 0.02  # pod created -> bound to the node (PodScheduled)
    pull: float = 0.05  # bound -> sandbox up, images "pulled", podIP assigned
    start: float = 0.05  # per init container run, and before app containers start
    ready: float = 0.05  # running -> ready (for containers with a readinessProbe)
    restart: float = 0.05  # terminated container -> running again (restartPolicy)
    terminate: float = 0.0  # graceful delete -> kubelet confirms (object removed)


@dataclass
class KubeletConfig:
    node_name: str = "raybus-sim-node"
    host_ip: str = "172.18.0.2"
    delays: Delays = field(default_factory=Delays)
    namespace_delays: dict[str, Delays] = field(default_factory=dict)
    # The local API server's stand-ins for kube-controller-manager (raybus_sim.controllers); a real
    # control plane has its own, so the node never runs them.
    endpoint_slices: bool = True
    jobs: bool = True


@dataclass
class ReadinessHold:
    namespace: str | None
    selector: str
    pred: Pred


class Kubelet:
    def __init__(self, api: ClusterView, config: KubeletConfig) -> None:
        self.api = api
        self.config = config
        self.pods: dict[tuple[str, str], PodSim] = {}
        self.tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.holds: dict[int, ReadinessHold] = {}
        # id -> image (exact, or prefix ending in "*") whose pulls fail
        self.pull_failures: dict[int, str] = {}
        self._hold_seq = 0
        self._adopted = itertools.count(1)
        self._ip = 0
        self.started = False
        # Submitter containers run `ray job ...` against these dashboards once set (submitter.py).
        self.programs = ContainerPrograms(self)
        # The GCS FT Redis cleanup Job's container exits (redis_cleanup.py).
        self.redis_cleanup = RedisCleanupRunner(self)
        api.pods.listeners.append(self.on_event)

    async def handle_http(self, request: web.Request, segs: list[str]) -> web.StreamResponse:
        return await faults.handle(self, request, segs)

    # --- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Take over every Pod the (synced) cache holds (node.py registered the Node)."""
        self.started = True
        pods = self.api.pods.objects()
        for pod in pods:  # pod IPs stay unique across a restart
            ip = str((pod.get("status") or {}).get("podIP") or "")
            if ip.startswith("10.244."):
                a, b = ip.split(".")[2:4]
                self._ip = max(self._ip, int(a) * 256 + int(b))
        for pod in pods:  # resume what an earlier run (or a restarted API server) left
            self._adopt(pod)

    async def stop(self) -> None:
        self.started = False
        await self.programs.close()
        tasks = list(self.tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def delays(self, ns: str) -> Delays:
        return self.config.namespace_delays.get(ns, self.config.delays)

    def set_delays(self, ns: str | None, **values: float) -> Delays:
        base = self.delays(ns) if ns else self.config.delays
        new = replace(base, **values)
        if ns:
            self.config.namespace_delays[ns] = new
        else:
            self.config.delays = new
        return new

    def pod(self, ns: str, name: str) -> Obj | None:
        return self.api.pods.get(ns, name)

    def current(self, sim: PodSim) -> Obj | None:
        """The cached Pod `sim` simulates, or None once it is gone or replaced."""
        cur = self.pod(sim.namespace, sim.name)
        return cur if cur is not None and cur["metadata"]["uid"] == sim.uid else None

    def on_event(self, ev: ObjEvent) -> None:
        if not self.started:
            return
        if ev.type == "DELETED":
            key = (ev.obj["metadata"].get("namespace", ""), ev.obj["metadata"]["name"])
            sim = self.pods.get(key)
            if sim is not None and sim.uid == ev.obj["metadata"]["uid"]:
                self.pods.pop(key, None)
                self.programs.stop(*key)
                task = self.tasks.pop(key, None)
                if task is not None and task is not asyncio.current_task():
                    task.cancel()
            return
        self._adopt(ev.obj)

    def _adopt(self, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node != self.config.node_name:
            return  # another node's Pod
        sim = self.pods.get(key)
        if meta.get("deletionTimestamp"):
            self.programs.stop(*key)
            if key not in self.tasks or (sim is not None and sim.uid != meta["uid"]):
                self._spawn(key, self._terminate(key, meta["uid"]))
            elif sim is not None and not sim.terminating:
                self.tasks[key].cancel()
                self._spawn(key, self._terminate(key, meta["uid"]))
            if sim is not None:
                sim.terminating = True
            return
        if sim is not None and sim.uid == meta["uid"]:
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return
        sim = PodSim.from_pod(pod, self.config.host_ip)
        sim.order = next(self._adopted)
        self.pods[key] = sim
        if (pod.get("spec") or {}).get("nodeName") and phase == "Running":
            self._resume_running(sim, pod)
            return
        self._spawn(key, self._run(sim))

    def _spawn(self, key: tuple[str, str], coro: Any) -> None:
        self.tasks[key] = asyncio.get_running_loop().create_task(coro)

    def _resume_running(self, sim: PodSim, pod: Obj) -> None:
        st = pod.get("status") or {}
        sim.scheduled = sim.admitted = sim.sandbox = True
        sim.pod_ip, sim.start_time = st.get("podIP", ""), st.get("startTime")
        by_name = {c["name"]: c for c in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])}
        for c in sim.init + sim.containers:
            prev = by_name.get(c.name) or {}
            c.restart_count, c.ready = prev.get("restartCount", 0), bool(prev.get("ready"))
            c.container_id = prev.get("containerID")
            state = prev.get("state") or {}
            if "running" in state:
                c.state, c.reason, c.started_at = "running", "", state["running"].get("startedAt")
            elif "terminated" in state:
                t = state["terminated"]
                c.state, c.exit_code, c.reason = "terminated", t.get("exitCode", 0), t.get("reason", "")
                c.started_at, c.finished_at = t.get("startedAt"), t.get("finishedAt")
        self.programs.started(sim)  # a submitter that was running starts over (its CLI died with us)
        if any(c.state == "running" and not c.ready for c in sim.containers):
            # Restarted between "running" and its readiness probe passing: a real kubelet keeps
            # probing, so the Pod still turns Ready (the chaos soak saw a RayJob's worker stay
            # unready for good after an API server restart, and its RayJob Initializing).
            self._spawn((sim.namespace, sim.name), self._become_ready(sim))

    async def _become_ready(self, sim: PodSim) -> None:
        await self._sleep(self.delays(sim.namespace).ready)
        for c in sim.containers:
            if c.state == "running":
                c.ready = True
        await self.write_status(sim)

    # --- status writes -----------------------------------------------------------------------------
    async def write_status(self, sim: PodSim) -> bool:
        """Render and write the pod status; False when the pod is gone or replaced (stop simulating)."""
        async with sim.lock:
            cur = self.current(sim)
            if cur is None:
                return False
            sim.held = any(h.pred(cur) and h.namespace in (None, sim.namespace) for h in self.holds.values())
            if sim.held:
                for c in sim.containers:
                    c.ready = False
            return await self.api.write_pod_status(sim.namespace, sim.name, sim.uid, sim.render(cur.get("status")),
                                                   order=sim.order)

    def _next_ip(self) -> str:
        self._ip += 1
        if self._ip & 255 == 0:  # skip .0 host addresses
            self._ip += 1
        return f"10.244.{(self._ip >> 8) & 255}.{self._ip & 255}"

    async def _sleep(self, secs: float) -> None:
        await asyncio.sleep(secs)  # 0 still yields, so bursts of creates interleave with lifecycle writes

    async def _run(self, sim: PodSim) -> None:
        d = self.delays(sim.namespace)
        await self._sleep(d.schedule)
        cur = self.current(sim)
        if cur is None:
            return
        sim.scheduled = True
        if not (cur.get("spec") or {}).get("nodeName"):
            # The scheduler's part: pods/binding sets nodeName and PodScheduled=True.
            if not await self.api.bind(sim.namespace, sim.name, sim.uid, self.config.node_name, order=sim.order):
                return
        elif not await self.write_status(sim):
            return
        await self._sleep(0)
        # The kubelet's first status: admitted, containers waiting, no pod IP yet.
        sim.admitted, sim.start_time = True, now_rfc3339()
        for c in sim.containers:
            c.reason = "PodInitializing" if sim.init else "ContainerCreating"
        if not await self.write_status(sim):
            return
        if not await configrefs.wait_for_volumes(self, sim):  # missing Secret/ConfigMap volume
            return
        await self._sleep(d.pull)
        sim.sandbox, sim.pod_ip = True, self._next_ip()
        if not await self.write_status(sim):
            return
        if not await self._pull_images(sim, d):
            return
        if not await configrefs.wait_for_env(self, sim, init=True):  # CreateContainerConfigError
            return
        for c in sim.init:
            c.start()
            if not await self.write_status(sim):
                return
            await self._sleep(d.start)
            c.terminate(0)
        await self._sleep(d.start)
        if not await configrefs.wait_for_env(self, sim, init=False):  # CreateContainerConfigError
            return
        for c in sim.containers:
            c.start()
            c.ready = not c.has_probe
        if not await self.write_status(sim):
            return
        if any(c.has_probe for c in sim.containers):
            await self._sleep(d.ready)
            for c in sim.containers:
                if c.state == "running":
                    c.ready = True
            if not await self.write_status(sim):
                return
        self.programs.started(sim)

    def _pull_fails(self, image: str) -> bool:
        return any(image == rule or (rule.endswith("*") and image.startswith(rule[:-1]))
                   for rule in self.pull_failures.values())

    async def _pull_images(self, sim: PodSim, d: Delays) -> bool:
        """While an image matches a pull-failure rule: ErrImagePull, then ImagePullBackOff, retried every
        `pull` s (at least 50 ms) until the rule is removed. False if the pod went away meanwhile."""
        reason = "ErrImagePull"
        while True:
            failing = [c for c in sim.init + sim.containers if self._pull_fails(c.image)]
            if not failing:
                for c in sim.init + sim.containers:
                    c.message = None
                return True
            for c in failing:
                c.reason, c.message = reason, f'Back-off pulling image "{c.image}"'
            if not await self.write_status(sim):
                return False
            reason = "ImagePullBackOff"
            await self._sleep(max(d.pull, 0.05))

    async def _terminate(self, key: tuple[str, str], uid: str) -> None:
        await self._sleep(self.delays(key[0]).terminate)
        cur = self.pod(*key)
        if cur is not None and cur["metadata"]["uid"] == uid:
            try:  # the containers are stopped: the kubelet's final delete
                await self.api.delete_pod(key[0], key[1], uid=uid, grace_s=0)
            except KubeError:
                pass
        if self.tasks.get(key) is asyncio.current_task():
            self.tasks.pop(key, None)

    # --- fault operations (used by faults.py) ------------------------------------------------------
    def sim_for(self, ns: str, name: str) -> PodSim:
        sim = self.pods.get((ns, name))
        if sim is None:
            raise ApiError(404, "NotFound", f'pod "{name}" is not running on the simulated node')
        return sim

    async def fail_pod(self, ns: str, name: str, *, reason: str | None, message: str | None) -> None:
        sim = self.sim_for(ns, name)
        self._cancel(ns, name)
        for c in sim.containers:
            if c.state != "terminated":
                c.terminate(1, "Error")
        sim.phase_override, sim.reason, sim.message = "Failed", reason, message
        await self.write_status(sim)

    async def terminate_container(self, ns: str, name: str, container: str, *, exit_code: int,
                            reason: str | None) -> None:
        sim = self.sim_for(ns, name)
        targets = [c for c in sim.containers if c.name == container or container == "*"]
        if not targets:
            raise ApiError(404, "NotFound", f'container "{container}" not found in pod "{name}"')
        self._cancel(ns, name)
        for c in targets:
            c.terminate(exit_code, reason)
        await self.write_status(sim)
        restart = sim.restart_policy == "Always" or (sim.restart_policy == "OnFailure" and exit_code != 0)
        if restart:
            self._spawn((ns, name), self._restart(sim, targets))

    async def _restart(self, sim: PodSim, targets: list[ContainerSim]) -> None:
        d = self.delays(sim.namespace)
        for c in targets:
            c.last_state = {"terminated": c.render()["state"]["terminated"]}
        if any(c.restart_count > 0 for c in targets):
            # A container that already restarted and dies again sits in CrashLoopBackOff, like a kubelet's
            # back-off (the wait itself is `restart` s here, not 10s doubling).
            for c in targets:
                c.state, c.reason = "waiting", "CrashLoopBackOff"
                c.message = (f"back-off 10s restarting failed container={c.name} "
                             f"pod={sim.name}_{sim.namespace}({sim.uid})")
            if not await self.write_status(sim):
                return
        await self._sleep(d.restart)
        for c in targets:
            c.restart_count += 1
            c.message = None
            c.start()
            c.ready = not c.has_probe and not sim.held
        if not await self.write_status(sim):
            return
        if any(c.has_probe for c in targets):
            await self._sleep(d.ready)
            for c in targets:
                c.ready = c.state == "running"
            if not await self.write_status(sim):
                return
        self.programs.started(sim)

    def _cancel(self, ns: str, name: str) -> None:
        task = self.tasks.pop((ns, name), None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def add_hold(self, namespace: str | None, selector: str) -> int:
        self._hold_seq += 1
        hold_id = self._hold_seq
        self.holds[hold_id] = ReadinessHold(namespace, selector, compile_label_selector(selector))
        await self._reapply_holds()
        return hold_id

    async def remove_hold(self, hold_id: int) -> None:
        if self.holds.pop(hold_id, None) is None:
            raise ApiError(404, "NotFound", f"readiness hold {hold_id} not found")
        await self._reapply_holds()

    async def _reapply_holds(self) -> None:
        for (ns, name), sim in list(self.pods.items()):
            cur = self.pod(ns, name)
            if cur is None:
                continue
            held = any(h.pred(cur) and h.namespace in (None, ns) for h in self.holds.values())
            if held == sim.held:
                continue
            sim.held = held
            for c in sim.containers:
                c.ready = c.state == "running" and not held
            await self.write_status(sim)

