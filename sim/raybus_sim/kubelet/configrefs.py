"""Secrets and ConfigMaps a Pod references must exist before its containers start, as with a real
kubelet:

- a volume (``secret``, ``configMap``, or a ``projected`` source of either) whose object is missing
  keeps the Pod in ContainerCreating: no sandbox, no Pod IP (the kubelet's FailedMount retries);
- an ``env[].valueFrom.secretKeyRef``/``configMapKeyRef`` or ``envFrom`` whose object (or key) is
  missing stops that container at waiting ``CreateContainerConfigError`` with the kubelet's message
  (``secret "x" not found``, ``couldn't find key k in Secret ns/x``), checked again every ``pull``
  interval (at least 50 ms) until the object appears; then the container starts.

``optional: true`` references never block, like the real kubelet. Pure lookups + one wait loop;
kubelet.py calls ``wait_for_volumes`` before the sandbox and ``wait_for_env`` before each phase of
containers (init, then app) starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from raybus_sim.kubelet.client import ClusterView, Obj

if TYPE_CHECKING:
    from .kubelet import Kubelet
    from .podstate import ContainerSim, PodSim

CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
_KINDS = {"secret": ("secrets", "Secret"), "configmap": ("configmaps", "ConfigMap")}


def _find(api: ClusterView, kind: str, namespace: str, name: str) -> Obj | None:
    return api.find(kind, namespace, name)


def _keys(obj: Obj) -> set[str]:
    return set(obj.get("data") or {}) | set(obj.get("stringData") or {}) | set(obj.get("binaryData") or {})


def _ref(api: ClusterView, namespace: str, kind: str, name: str, key: str | None) -> str | None:
    """The kubelet's error for one reference, or None when it resolves."""
    obj = _find(api, kind, namespace, name)
    if obj is None:
        return f'{kind} "{name}" not found'
    if key is not None and key not in _keys(obj):
        return f"couldn't find key {key} in {_KINDS[kind][1]} {namespace}/{name}"
    return None


def missing_env_ref(api: ClusterView, namespace: str, container: Mapping[str, Any]) -> str | None:
    """makeEnvironmentVariables: the first unresolvable env / envFrom reference of a container."""
    for source in container.get("envFrom") or []:
        for field, kind in (("secretRef", "secret"), ("configMapRef", "configmap")):
            ref = source.get(field)
            if isinstance(ref, Mapping) and not ref.get("optional"):
                error = _ref(api, namespace, kind, str(ref.get("name") or ""), None)
                if error:
                    return error
    for env in container.get("env") or []:
        value_from = env.get("valueFrom") if isinstance(env, Mapping) else None
        if not isinstance(value_from, Mapping):
            continue
        for field, kind in (("secretKeyRef", "secret"), ("configMapKeyRef", "configmap")):
            ref = value_from.get(field)
            if isinstance(ref, Mapping) and not ref.get("optional"):
                error = _ref(api, namespace, kind, str(ref.get("name") or ""), str(ref.get("key") or ""))
                if error:
                    return error
    return None


def _volume_refs(volume: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    secret, config_map = volume.get("secret"), volume.get("configMap")
    if isinstance(secret, Mapping) and not secret.get("optional"):
        yield "secret", str(secret.get("secretName") or "")
    if isinstance(config_map, Mapping) and not config_map.get("optional"):
        yield "configmap", str(config_map.get("name") or "")
    projected = volume.get("projected")
    for source in (projected.get("sources") or []) if isinstance(projected, Mapping) else []:
        for field, kind in (("secret", "secret"), ("configMap", "configmap")):
            ref = source.get(field) if isinstance(source, Mapping) else None
            if isinstance(ref, Mapping) and not ref.get("optional"):
                yield kind, str(ref.get("name") or "")


def missing_volume_ref(api: ClusterView, namespace: str, pod_spec: Mapping[str, Any]) -> str | None:
    """The first volume whose Secret/ConfigMap does not exist (MountVolume.SetUp failed)."""
    for volume in pod_spec.get("volumes") or []:
        for kind, name in _volume_refs(volume):
            if _find(api, kind, namespace, name) is None:
                return f'MountVolume.SetUp failed for volume "{volume.get("name")}" : {kind} "{name}" not found'
    return None


def _pod(kubelet: Kubelet, sim: PodSim) -> Obj | None:
    return kubelet.current(sim)


async def _retry(kubelet: Kubelet, sim: PodSim) -> None:
    await asyncio.sleep(max(kubelet.delays(sim.namespace).pull, 0.05))


async def wait_for_volumes(kubelet: Kubelet, sim: PodSim) -> bool:
    """Hold the Pod in ContainerCreating until every referenced Secret/ConfigMap exists; False when
    the Pod went away meanwhile."""
    while True:
        cur = _pod(kubelet, sim)
        if cur is None:
            return False
        if missing_volume_ref(kubelet.api, sim.namespace, cur.get("spec") or {}) is None:
            return True
        await _retry(kubelet, sim)


async def wait_for_env(kubelet: Kubelet, sim: PodSim, *, init: bool) -> bool:
    """CreateContainerConfigError on the containers (init or app) whose env cannot be resolved,
    until it can; False when the Pod went away meanwhile."""
    key = "initContainers" if init else "containers"
    sims: list[ContainerSim] = sim.init if init else sim.containers
    blocked = False
    while True:
        cur = _pod(kubelet, sim)
        if cur is None:
            return False
        specs = {c.get("name"): c for c in (cur.get("spec") or {}).get(key) or []}
        errors = {c.name: missing_env_ref(kubelet.api, sim.namespace, specs.get(c.name) or {}) for c in sims}
        if not any(errors.values()):
            if blocked:
                for c in sims:
                    c.reason, c.message = "ContainerCreating", None
            return True
        blocked = True
        for c in sims:
            if errors[c.name]:
                c.state, c.reason, c.message = "waiting", CREATE_CONTAINER_CONFIG_ERROR, errors[c.name]
        if not await kubelet.write_status(sim):
            return False
        await _retry(kubelet, sim)
