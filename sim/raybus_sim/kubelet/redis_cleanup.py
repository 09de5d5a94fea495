"""The GCS FT Redis cleanup Job's container (KubeRay's ``python -c "...cleanup_redis_storage..."``).

There is no Redis behind the simulated heads, so the script is taken to succeed: once the container
of a ``ray.io/node-type=redis-cleanup`` Pod runs, it exits 0 shortly after (``start`` delay) and,
with the Job's restartPolicy Never, the Pod Succeeds and the Job controller marks the Job Complete.
A test makes it fail instead with the annotation ``sim.raybus.io/exit-code`` on the RayCluster's
head Pod template (the cleanup Job copies the head Pod's annotations): e.g. "1" -> the Pod Fails
and, with backoffLimit 0, the Job is Failed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from raybus_sim.apiserver.errors import ApiError
from raybus_sim.kubelet.client import ObjEvent

if TYPE_CHECKING:
    from .kubelet import Kubelet

NODE_TYPE_LABEL = "ray.io/node-type"
REDIS_CLEANUP = "redis-cleanup"
EXIT_CODE_ANNOTATION = "sim.raybus.io/exit-code"


class RedisCleanupRunner:
    """Ends the cleanup Pods' containers (one exit per Pod incarnation)."""

    def __init__(self, kubelet: Kubelet) -> None:
        self.kubelet = kubelet
        self.done: set[str] = set()  # Pod uids already ended
        kubelet.api.pods.listeners.append(self.on_event)

    def on_event(self, ev: ObjEvent) -> None:
        if ev.type == "DELETED" or not self.kubelet.started:
            return
        meta = ev.obj["metadata"]
        if (meta.get("labels") or {}).get(NODE_TYPE_LABEL) != REDIS_CLEANUP or meta["uid"] in self.done:
            return
        statuses = (ev.obj.get("status") or {}).get("containerStatuses") or []
        if not statuses or not all("running" in (c.get("state") or {}) for c in statuses):
            return
        self.done.add(meta["uid"])
        try:
            code = int((meta.get("annotations") or {}).get(EXIT_CODE_ANNOTATION, "0"))
        except ValueError:
            code = 1
        delay = self.kubelet.delays(meta.get("namespace", "")).start
        asyncio.get_running_loop().create_task(self._exit(meta.get("namespace", ""), meta["name"], code, delay))

    async def _exit(self, namespace: str, name: str, code: int, delay: float) -> None:
        await asyncio.sleep(delay)
        with contextlib.suppress(ApiError):  # the Pod went away meanwhile
            await self.kubelet.terminate_container(namespace, name, "*", exit_code=code,
                                                   reason="Completed" if code == 0 else "Error")
