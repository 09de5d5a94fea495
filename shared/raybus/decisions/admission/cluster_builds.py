"""What the RayCluster controller's decision code creates for one live RayCluster: every object
rayClusterReconcile may create (owned.py, auth_secret.py, network_policy.py, redis_cleanup.py,
batch_scheduler.py) and its Pods (pod_manifest.py), built by those very functions.

Built once per RayCluster spec (metadata.generation), labels and annotations (_Builds), not once
per batch or Pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_json

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
from raybus.decisions.cluster.k8s_services import (
    build_head_ingress,
    build_head_service,
    build_headless_worker_service,
    build_serve_service,
    is_serve_service_enabled,
    needs_headless_worker_service,
)
from raybus.decisions.cluster.network_policy import build_network_policies
from raybus.decisions.cluster.pod_manifest import cluster_spec_hash, head_pod_manifest, worker_pod_manifest
from raybus.decisions.cluster.pod_template import head_pod_name_prefix, worker_pod_name_prefix
from raybus.decisions.cluster.rbac import build_autoscaler_rbac
from raybus.decisions.cluster.redis_cleanup import build_redis_cleanup_job, redis_cleanup_applies
from raybus.decisions.cluster.settings import OperatorSettings

Json = Mapping[str, Any]
ObjKey = tuple[str, str, str]  # (apiVersion, kind, name)
INDEX_LABELS = (podutil.REPLICA_INDEX_LABEL, podutil.REPLICA_NAME_LABEL, podutil.HOST_INDEX_LABEL)
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
        hosts = group.num_of_hosts or 1
        _check_indices(labels, hosts=hosts, indexing=self.settings.feature_gates.ray_multi_host_indexing)
        # One build per group: the indices only ever set their three labels (exempt.py), which the
        # comparison leaves out; built with index 0, as KubeRay's int parameters default.
        return self._shape(("worker", group_name), lambda: worker_pod_manifest(
            self.cluster, group, settings=self.settings, name=_PLACEHOLDER, replica_group_name="",
            replica_index=0, host_index=0))

    def _shape(self, key: tuple[Any, ...], build: Any) -> Any:
        shape = self._pods.get(key)
        if shape is None:
            pod = build()
            group = podutil.labels(pod).get(podutil.GROUP_LABEL, "")
            pod = add_scheduler_metadata(self.cluster, pod, group_name=group, settings=self.settings)
            shape = self._pods[key] = as_received(without_indices(without_name(pod)))
        return shape


def _check_indices(labels: Mapping[str, str], *, hosts: int, indexing: bool) -> None:
    """The RayMultiHostIndexing labels a created worker Pod carries: exactly those the builder sets
    (the replica index with the gate on; the replica name and host index for a multi-host group),
    each of its form (exempt.py)."""
    expected = set(INDEX_LABELS[:1] if hosts == 1 else INDEX_LABELS) if indexing else set()
    present = {key for key in INDEX_LABELS if key in labels}
    if present != expected:
        raise Refused(NOT_BUILT, f"worker Pod index labels {sorted(present)}, the builder sets {sorted(expected)}")
    replica, host = labels.get(podutil.REPLICA_INDEX_LABEL), labels.get(podutil.HOST_INDEX_LABEL)
    if replica is not None and not replica.isdigit():
        raise Refused(NOT_BUILT, f"replica index label {replica!r} is not a number")
    if host is not None and not (host.isdigit() and int(host) < hosts):
        raise Refused(NOT_BUILT, f"host index label {host!r} is not below numOfHosts {hosts}")


def without_indices(pod: Any) -> Any:
    """A Pod without its RayMultiHostIndexing labels (a shallow copy where it had any)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if not any(key in labels for key in INDEX_LABELS):
        return pod
    meta = dict(pod["metadata"])
    meta["labels"] = {key: value for key, value in labels.items() if key not in INDEX_LABELS}
    return {**pod, "metadata": meta}


class _Builds:
    """One ClusterBuilds per RayCluster while what the builders read is unchanged: its spec
    (metadata.generation), labels, annotations and deletion, and the settings. Not its status: a
    RayCluster's status write is a new object every reconcile, and rebuilding its Pods each time
    would cost as much as the reconcile."""

    def __init__(self, limit: int = 20_000) -> None:
        self._limit = limit
        self._last: dict[tuple[str, str], tuple[tuple[Any, ...], ClusterBuilds]] = {}

    def get(self, raw: Json, settings: OperatorSettings) -> ClusterBuilds:
        m = meta(raw)
        name = (str(m.get("namespace") or ""), str(m.get("name") or ""))
        generation = m.get("generation")
        key = (m.get("uid"), generation if generation is not None else m.get("resourceVersion"),
               m.get("deletionTimestamp"), to_json(m.get("labels") or {}), to_json(m.get("annotations") or {}),
               id(settings), settings)
        hit = self._last.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        builds = ClusterBuilds(raw, settings)
        if len(self._last) >= self._limit:
            self._last.clear()
        self._last[name] = (key, builds)
        return builds


_BUILDS = _Builds()


def cluster_builds(raw: Json, settings: OperatorSettings) -> ClusterBuilds:
    return _BUILDS.get(raw, settings)


def check_cluster_create(raw: Json, created: Json, settings: OperatorSettings, *, what: str) -> None:
    """Refuse `created` unless the RayCluster controller builds exactly it for the live `raw`."""
    builds = cluster_builds(raw, settings)
    if created.get("kind") == "Pod" and created.get("apiVersion") == "v1":
        if without_indices(without_name(created)) != builds.pod(created):
            raise Refused(NOT_BUILT, f"{what} is not the Pod the RayCluster's spec builds")
        return
    key = (str(created.get("apiVersion") or ""), str(created.get("kind") or ""), str(meta(created).get("name") or ""))
    expected = builds.owned().get(key)
    if expected is None:
        raise Refused(NOT_BUILT, f"the RayCluster controller builds no {where(key[1], builds.cluster.namespace, key[2])}")
    if created != expected:
        raise Refused(NOT_BUILT, f"{what} differs from what the RayCluster controller builds")
