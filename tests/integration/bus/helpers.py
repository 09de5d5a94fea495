"""Helpers for bus tests: publish object versions + triggers like the watcher does."""

from __future__ import annotations

from nats.js import JetStreamContext

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent, ObjectKey
from raybus.bus.publish import publish_object, publish_trigger


async def publish_version(js: JetStreamContext, *, name: str, version: int, partitions: int,
                          namespace: str = "default") -> None:
    key = ObjectKey(namespace=namespace, name=name)
    obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(version)}}
    seq = await publish_object(js, ObjectEvent(key=key, kind=s.Kind.RAYCLUSTER.value,
                                               type="MODIFIED", resource_version=str(version),
                                               object=obj))
    await publish_trigger(js, controller=s.Controller.CLUSTER, key=key, kind="raycluster",
                          cause="test", objects_seq=seq, cause_kind="raycluster",
                          partitions=partitions)
