"""What the RayCluster controller's decision code creates for one live RayCluster: every object
rayClusterReconcile may create (owned.py, auth_secret.py, network_policy.py, redis_cleanup.py,
batch_scheduler.py) and its Pods (pod_manifest.py), built by those very functions.

Memoised per live object (decisions/memo.py): the executor's informer hands the same dict until
the RayCluster's next watch event, so a RayCluster's creates are built once per version, not once
per Pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from raybus.api.defaults import with_defaults
from raybus.api.raycluster import RayCluster
from raybus.decisions.admission.exempt import as_received, generated_name_ok, without_name
from raybus.decisions.admission.verdict import MALFORMED, NOT_BUILT, Refused, meta, where
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.auth_secret import build_auth_secret, needs_generated_auth_secret
from raybus.decisions.cluster.batch_scheduler import (
    SCHEDULER_PLUGINS,
    VOLCANO,
    add_scheduler_metadata,
    build_scheduler_plugins_pod_group,
    build_volcano_pod_group,
    gang_scheduling_enabled,
)
from raybus.decisions.cluster.network_policy import build_network_policies
from raybus.decisions.cluster.pod_manifest import cluster_spec_hash, head_pod_manifest, worker_pod_manifest
from raybus.decisions.cluster.pod_template import head_pod_name_prefix, worker_pod_name_prefix
from raybus.decisions.cluster.rbac import build_autoscaler_rbac
from raybus.decisions.cluster.redis_cleanup import build_redis_cleanup_job, redis_cleanup_applies
from raybus.decisions.cluster.services import (
    build_head_ingress,
    build_head_service,
    build_headless_worker_service,
    build_serve_service,
    is_serve_service_enabled,
    needs_headless_worker_service,
)
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.memo import LastPerObject

Json = Mapping[str, Any]
ObjKey = tuple[str, str, str]  # (apiVersion, kind, name)
_PLACEHOLDER = "admission-placeholder"


class ClusterBuilds:
    """The builds of one (live RayCluster, settings) pair; Pod shapes filled in as asked for."""

    def __init__(self, raw: Json, settings: OperatorSettings) -> None:
        try:
            self.cluster = with_defaults(RayCluster.model_validate(dict(raw)))
        except ValidationError:
            raise Refused(MALFORMED, "the live RayCluster does not parse") from None
        self.settings = settings
        self._owned: dict[ObjKey, Any] | None = None
        self._pods: dict[tuple[Any, ...], Any] = {}

    # --- everything but Pods -------------------------------------------------------------------
    def owned(self) -> dict[ObjKey, Any]:
        if self._owned is None:
            self._owned = {(str(o["apiVersion"]), str(o["kind"]), str(o["metadata"]["name"])): as_received(o)
                           for o in self._build_owned()}
        return self._owned

    def _build_owned(self) -> list[Any]:
        cluster, settings = self.cluster, self.settings
        out: list[Any] = list(build_autoscaler_rbac(cluster))
        if cluster.spec.head_group_spec.enable_ingress:
            out.append(build_head_ingress(cluster))
        if needs_generated_auth_secret(cluster):
            out.append(build_auth_secret(cluster))
        out.append(build_head_service(cluster, settings=settings))
        if needs_headless_worker_service(cluster):
            out.append(build_headless_worker_service(cluster))
        if is_serve_service_enabled(cluster):
            try:
                out.append(build_serve_service(cluster))
            except ValueError:
                pass  # reconcileServeService errors out: nothing to create
        if settings.feature_gates.ray_cluster_network_policy:
            out += build_network_policies(cluster)
        # The Redis cleanup Job only once the RayCluster is being deleted (its GCS finalizer).
        if cluster.metadata.deletion_timestamp and redis_cleanup_applies(cluster, settings):
            out.append(build_redis_cleanup_job(cluster, settings=settings))
        if settings.batch_scheduler == VOLCANO:
            out.append(build_volcano_pod_group(cluster, settings=settings))
        elif settings.batch_scheduler == SCHEDULER_PLUGINS and gang_scheduling_enabled(cluster):
            out.append(build_scheduler_plugins_pod_group(cluster))
        return out

    # --- Pods ----------------------------------------------------------------------------------------
    def pod(self, created: Json) -> Any:
        """The Pod the decision code builds under `created`'s name and indices (without its name),
        and `created` without its name; refused when the name is not one the builder gives."""
        labels = podutil.labels(created)
        name = str(meta(created).get("name") or "")
        node_type = labels.get(k.RAY_NODE_TYPE_LABEL_KEY)
        if node_type == k.HEAD_NODE:
            prefix = head_pod_name_prefix(self.cluster, settings=self.settings)
            if not (name == prefix if self.settings.enable_deterministic_head_pod_name
                    else generated_name_ok(name, prefix)):
                raise Refused(NOT_BUILT, f"head Pod name {name!r} is not {prefix!r} + a generated suffix")
            return self._shape(("head",), lambda: head_pod_manifest(
                self.cluster, settings=self.settings, name=_PLACEHOLDER,
                cluster_hash=cluster_spec_hash(self.cluster)))
        group_name = labels.get(k.RAY_NODE_GROUP_LABEL_KEY, "")
        group = next((g for g in self.cluster.spec.worker_group_specs or [] if g.group_name == group_name), None)
        if node_type != k.WORKER_NODE or group is None:
            raise Refused(NOT_BUILT, f"Pod {name} is neither the head nor a worker of a group of the RayCluster")
        prefix = worker_pod_name_prefix(self.cluster, group)
        if not generated_name_ok(name, prefix):
            raise Refused(NOT_BUILT, f"worker Pod name {name!r} is not {prefix!r} + a generated suffix")
        indices = _indices(labels, hosts=group.num_of_hosts or 1) \
            if self.settings.feature_gates.ray_multi_host_indexing else (None, None, None)
        return self._shape(("worker", group_name, *indices), lambda: worker_pod_manifest(
            self.cluster, group, settings=self.settings, name=_PLACEHOLDER, replica_group_name=indices[0],
            replica_index=indices[1], host_index=indices[2]))

    def _shape(self, key: tuple[Any, ...], build: Any) -> Any:
        shape = self._pods.get(key)
        if shape is None:
            pod = build()
            group = podutil.labels(pod).get(podutil.GROUP_LABEL, "")
            pod = add_scheduler_metadata(self.cluster, pod, group_name=group, settings=self.settings)
            shape = self._pods[key] = as_received(without_name(pod))
        return shape


def _indices(labels: Mapping[str, str], *, hosts: int) -> tuple[str | None, int | None, int | None]:
    """RayMultiHostIndexing labels a created worker Pod carries (exempt, checked for form)."""
    replica = labels.get(podutil.REPLICA_INDEX_LABEL)
    host = labels.get(podutil.HOST_INDEX_LABEL)
    if replica is not None and not replica.isdigit():
        raise Refused(NOT_BUILT, f"replica index label {replica!r} is not a number")
    if host is not None and not (host.isdigit() and int(host) < hosts):
        raise Refused(NOT_BUILT, f"host index label {host!r} is not below numOfHosts {hosts}")
    return (labels.get(podutil.REPLICA_NAME_LABEL), int(replica) if replica is not None else None,
            int(host) if host is not None else None)


_BUILDS: LastPerObject[ClusterBuilds] = LastPerObject(limit=20_000)


def cluster_builds(raw: Json, settings: OperatorSettings) -> ClusterBuilds:
    key = (str(meta(raw).get("namespace") or ""), str(meta(raw).get("name") or ""))
    return _BUILDS.get(key, (raw, settings), lambda: ClusterBuilds(raw, settings))


def check_cluster_create(raw: Json, created: Json, settings: OperatorSettings, *, what: str) -> None:
    """Refuse `created` unless the RayCluster controller builds exactly it for the live `raw`."""
    builds = cluster_builds(raw, settings)
    if created.get("kind") == "Pod" and created.get("apiVersion") == "v1":
        if without_name(created) != builds.pod(created):
            raise Refused(NOT_BUILT, f"{what} is not the Pod the RayCluster's spec builds")
        return
    key = (str(created.get("apiVersion") or ""), str(created.get("kind") or ""), str(meta(created).get("name") or ""))
    expected = builds.owned().get(key)
    if expected is None:
        raise Refused(NOT_BUILT, f"the RayCluster controller builds no {where(key[1], builds.cluster.namespace, key[2])}")
    if created != expected:
        raise Refused(NOT_BUILT, f"{what} differs from what the RayCluster controller builds")
