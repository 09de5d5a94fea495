"""Per-pod simulated runtime state, rendered into a kubelet-shaped PodStatus."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from raybus_sim.apiserver.defaults import now_rfc3339


def _image_id(image: str) -> str:
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    elif "." not in repo.split("/", 1)[0]:
        repo = f"docker.io/{repo}"
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


@dataclass
class ContainerSim:
    name: str
    image: str
    has_probe: bool
    mounts: list[dict[str, Any]] = field(default_factory=list)
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int = 0
    message: str | None = None
    restart_count: int = 0
    ready: bool = False
    last_state: dict[str, Any] = field(default_factory=dict)
    container_id: str | None = None

    def start(self) -> None:
        self.state, self.reason = "running", ""
        self.started_at = now_rfc3339()
        self.container_id = f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}"

    def terminate(self, exit_code: int, reason: str | None = None, message: str | None = None) -> None:
        self.state, self.ready = "terminated", False
        self.exit_code = exit_code
        self.reason = reason or ("Completed" if exit_code == 0 else "Error")
        self.message = message
        self.finished_at = now_rfc3339()

    def render(self) -> dict[str, Any]:
        if self.state == "running":
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        elif self.state == "terminated":
            term: dict[str, Any] = {"exitCode": self.exit_code, "reason": self.reason,
                                    "startedAt": self.started_at, "finishedAt": self.finished_at,
                                    "containerID": self.container_id}
            if self.message:
                term["message"] = self.message
            state = {"terminated": term}
        else:
            state = {"waiting": {"reason": self.reason}}
            if self.message:
                state["waiting"]["message"] = self.message
        out: dict[str, Any] = {
            "name": self.name, "image": self.image, "imageID": _image_id(self.image) if self.container_id else "",
            "ready": self.ready, "restartCount": self.restart_count, "started": self.state == "running",
            "state": state, "lastState": self.last_state,
        }
        if self.container_id:
            out["containerID"] = self.container_id
        if self.mounts:  # 1.31+ kubelets report mounts (RecursiveReadOnlyMounts)
            out["volumeMounts"] = [
                {"name": m["name"], "mountPath": m["mountPath"],
                 **({"readOnly": True, "recursiveReadOnly": "Disabled"} if m.get("readOnly") else {})}
                for m in self.mounts]
        return out


@dataclass
class PodSim:
    namespace: str
    name: str
    uid: str
    restart_policy: str
    init: list[ContainerSim]
    containers: list[ContainerSim]
    host_ip: str
    pod_ip: str = ""
    scheduled: bool = False
    admitted: bool = False  # the kubelet has seen the pod: hostIP, startTime, waiting containers
    sandbox: bool = False
    phase_override: str | None = None
    reason: str | None = None
    message: str | None = None
    start_time: str | None = None
    held: bool = False
    terminating: bool = False
    cond_times: dict[str, tuple[str, str]] = field(default_factory=dict)
    order: int = 0  # the node's adoption order: its writes queue behind older Pods' (client.WriteSlots)
    # One status write at a time, rendered under the lock: writes travel over HTTP now, and an
    # older render must never land after a newer one.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, compare=False, repr=False)

    @classmethod
    def from_pod(cls, pod: dict[str, Any], host_ip: str) -> PodSim:
        spec = pod.get("spec") or {}

        def sims(key: str) -> list[ContainerSim]:
            return [ContainerSim(c["name"], c.get("image", ""), bool(c.get("readinessProbe")),
                                 list(c.get("volumeMounts") or []))
                    for c in spec.get(key) or []]

        init = sims("initContainers")
        for c in init:
            c.reason = "PodInitializing"
        meta = pod["metadata"]
        return cls(meta.get("namespace", ""), meta["name"], meta["uid"], spec.get("restartPolicy", "Always"),
                   init, sims("containers"), host_ip)

    def initialized(self) -> bool:
        return all(c.state == "terminated" and c.exit_code == 0 for c in self.init)

    def phase(self) -> str:
        if self.phase_override:
            return self.phase_override
        if not self.containers or not self.initialized():
            return "Pending"
        states = [c.state for c in self.containers]
        if all(s == "terminated" for s in states) and self.restart_policy != "Always":
            failed = any(c.exit_code != 0 for c in self.containers)
            if not failed:
                return "Succeeded"
            if self.restart_policy == "Never":
                return "Failed"
        if all(s in ("running", "terminated") for s in states):
            return "Running"
        return "Pending"

    def _cond(self, ctype: str, ok: bool, reason: str | None = None) -> dict[str, Any]:
        status = "True" if ok else "False"
        prev = self.cond_times.get(ctype)
        if prev is None or prev[0] != status:
            self.cond_times[ctype] = (status, now_rfc3339())
        c: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None,
                             "lastTransitionTime": self.cond_times[ctype][1]}
        if reason and not ok:
            c["reason"] = reason
        return c

    def render(self, pod_status: dict[str, Any] | None) -> dict[str, Any]:
        """New status; keeps fields this sim does not own (e.g. qosClass) from the stored status."""
        status = {k: v for k, v in (pod_status or {}).items()
                  if k in ("qosClass", "nominatedNodeName", "resize")}
        phase = self.phase()
        status["phase"] = phase
        conds = [self._cond("PodScheduled", self.scheduled)]
        if self.admitted:
            cready = bool(self.containers) and all(c.ready for c in self.containers) and phase == "Running"
            ready = cready and not self.held
            terminal = phase in ("Succeeded", "Failed")
            conds = [
                self._cond("PodReadyToStartContainers", self.sandbox and not terminal),
                self._cond("Initialized", self.initialized(), "ContainersNotInitialized"),
                self._cond("Ready", ready, "PodCompleted" if terminal else "ContainersNotReady"),
                self._cond("ContainersReady", cready, "PodCompleted" if terminal else "ContainersNotReady"),
                *conds,
            ]
            status["hostIP"] = self.host_ip
            status["hostIPs"] = [{"ip": self.host_ip}]
            if self.sandbox:  # the pod IP exists once the sandbox is up
                status["podIP"] = self.pod_ip
                status["podIPs"] = [{"ip": self.pod_ip}]
            status["startTime"] = self.start_time
            if self.init:
                status["initContainerStatuses"] = [c.render() for c in self.init]
            status["containerStatuses"] = [c.render() for c in self.containers]
        status["conditions"] = conds
        if self.reason:
            status["reason"] = self.reason
        if self.message:
            status["message"] = self.message
        return status
