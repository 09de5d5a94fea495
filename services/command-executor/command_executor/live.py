"""The command-executor's own view of the API server, which admission judges every batch against.

Never the bus: anyone holding the watcher's password can publish an object on `raybus.obj.>`, so
what RAYBUS_OBJECTS says exists proves nothing. The executor lists and watches, with its own
credentials, the Ray objects (whole: admission rebuilds what their decisions create from them) and
the objects it may delete or patch (metadata only: ownerReferences, labels, uid), like KubeRay's
informer cache. The kinds whose CRDs a cluster may lack (PodGroups, the Gateway API) are read with
a metadata GET when a batch names one: they are rare, and a 404 answers "not there".

Memory reads only on the hot path: admission spends no API request per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from raybus.adapters.api_view import ApiView, Watched
from raybus.adapters.kube import KubeClient, KubeError, resource_for
from raybus.decisions.admission.patches import RAY_KINDS
from raybus.decisions.cluster.batch_scheduler import (
    SCHEDULER_PLUGINS_POD_GROUP_API_VERSION,
    VOLCANO_POD_GROUP_API_VERSION,
)
from raybus.decisions.commands import Command, DeleteObject, PatchObject
from raybus.decisions.rayservice.constants import GATEWAY_API_VERSION

log = logging.getLogger(__name__)
Json = dict[str, Any]
# KubeRay's caches narrow Pods to Ray nodes and Jobs to the operator's (main.go cacheSelectors).
RAY_POD_SELECTOR = "ray.io/node-type in (head,worker,redis-cleanup)"
CREATED_BY = "app.kubernetes.io/created-by=kuberay-operator"


WATCHED = (
    Watched("raycluster", "ray.io/v1", "RayCluster"),
    Watched("rayjob", "ray.io/v1", "RayJob"),
    Watched("rayservice", "ray.io/v1", "RayService"),
    Watched("pod", "v1", "Pod", label_selector=RAY_POD_SELECTOR, metadata_only=True),
    Watched("service", "v1", "Service", metadata_only=True),
    Watched("job", "batch/v1", "Job", label_selector=CREATED_BY, metadata_only=True),
    Watched("ingress", "networking.k8s.io/v1", "Ingress", metadata_only=True),
    Watched("networkpolicy", "networking.k8s.io/v1", "NetworkPolicy", metadata_only=True),
)
# Read on demand (optional CRDs): kind -> the apiVersions it may be served under.
ON_DEMAND = {"PodGroup": (VOLCANO_POD_GROUP_API_VERSION, SCHEDULER_PLUGINS_POD_GROUP_API_VERSION),
             "Gateway": (GATEWAY_API_VERSION,), "HTTPRoute": (GATEWAY_API_VERSION,)}
assert {w.k8s_kind for w in WATCHED if not w.metadata_only} == RAY_KINDS


def live_view(kube: KubeClient, *, namespace: str | None = None) -> ExecutorView:
    return ExecutorView(kube, WATCHED, namespace=namespace)


class ExecutorView(ApiView):
    """The executor's informers, plus metadata GETs of the optional kinds a batch names."""

    def __init__(self, kube: KubeClient, watched: Iterable[Watched], *, namespace: str | None = None) -> None:
        super().__init__(kube, watched, namespace=namespace)
        self._kube = kube

    async def with_targets(self, commands: Iterable[Command]) -> BatchView:
        """This view plus the on-demand kinds the batch deletes or patches, read now."""
        extra: dict[tuple[str, str, str], Json] = {}
        for cmd in commands:
            if not isinstance(cmd, DeleteObject | PatchObject) or cmd.target.kind not in ON_DEMAND:
                continue
            t = cmd.target
            obj = await self._read(t.api_version, t.kind, t.namespace, t.name)
            if obj is not None:
                extra[(t.kind, t.namespace, t.name)] = obj
        return BatchView(self, extra)

    async def _read(self, api_version: str, kind: str, namespace: str, name: str) -> Json | None:
        if api_version not in ON_DEMAND[kind]:
            return None
        try:
            return await self._kube.get(resource_for(api_version, kind), namespace=namespace, name=name,
                                        metadata_only=True)
        except KeyError:  # no such resource known to the client
            return None
        except KubeError as exc:
            if not exc.not_found:
                log.warning("admission could not read a target", extra={"kind": kind, "code": exc.code})
        return None


class BatchView:
    """One batch's view: the informers plus what was read for it."""

    def __init__(self, base: ApiView, extra: Mapping[tuple[str, str, str], Json]) -> None:
        self._base, self._extra = base, extra

    def get(self, kind: str, namespace: str, name: str) -> Json | None:
        return self._extra.get((kind, namespace, name)) or self._base.get(kind, namespace, name)

    def gone(self, uid: str) -> bool:
        return self._base.gone(uid)
