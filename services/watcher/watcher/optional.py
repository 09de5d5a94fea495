"""Optional kinds: watched only while API discovery shows their CRDs, and as soon as it does.

Gateway API Gateways/HTTPRoutes and the batch schedulers' PodGroups are CRDs a cluster may not
have. Listing one that is not installed is a 404 that an informer would retry (and log) forever.
KubeRay checks discovery before it wires a controller to an optional API (main.go
`certManagerAPIAvailable`: `ServerGroupsAndResources`, else the controller is not set up), but only
at startup; raybus re-reads discovery every `interval_s`, so a CRD installed later is watched within
one interval without a restart, and one removed stops its informer.

Why periodic discovery rather than a watch on CustomResourceDefinitions: discovery is readable by
every authenticated user (the system:discovery ClusterRole), while a CRD watch needs a cluster-wide
get/list/watch grant on apiextensions.k8s.io that the read-only watcher otherwise never needs; and
discovery is what the informers' list paths actually depend on (a CRD can exist before it is
Established and served). One small GET per optional group-version per interval.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from raybus.adapters.kube import KubeClient, KubeError, resource_for
from watcher.routing import WatchSpec

log = logging.getLogger(__name__)


async def served(kube: KubeClient, specs: Iterable[WatchSpec]) -> dict[WatchSpec, bool | None]:
    """Per spec: True when discovery serves its resource, False when it definitely does not (the
    group-version is a 404 or lacks the resource), None when discovery failed (unknown: keep the
    current state, look again next interval)."""
    out: dict[WatchSpec, bool | None] = {}
    by_version: dict[str, set[str] | None] = {}
    for spec in specs:
        if spec.api_version not in by_version:
            try:
                by_version[spec.api_version] = await kube.served_resources(spec.api_version)
            except KubeError as exc:
                log.info("discovery failed, will look again", extra={
                    "api_version": spec.api_version, "code": exc.code, "reason": exc.reason})
                by_version[spec.api_version] = None
        resources = by_version[spec.api_version]
        plural = resource_for(spec.api_version, spec.k8s_kind).plural
        out[spec] = None if resources is None else plural in resources
    return out
