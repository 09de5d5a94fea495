"""Both services as real processes (`python -m watcher`, `python -m command_executor`) against
nats-server and the local API server: kubectl apply -> ObjectEvent + Trigger; a CommandBatch on
the bus -> the executor creates the head pod -> the watcher publishes it (its RayCluster wakes from
the cluster-reconciler's cache, tests/integration/bus/test_cache_wakes.py: no trigger)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path

import nats

from raybus.api.defaults import with_defaults
from raybus.api.raycluster import RayCluster
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectEvent, ObjectKey
from raybus.bus.publish import publish_commands
from raybus.bus.streams import ensure_streams
from raybus.decisions.cluster.pod_manifest import cluster_spec_hash, head_pod_manifest
from raybus.decisions.cluster.pod_template import head_pod_name_prefix
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject
from raybus_sim.testing.servers import NatsServer
from tests.conftest import REPO, SAMPLES
from tests.integration.boundary.conftest import last_msg, until


async def _spawn(module: str, nats_url: str, kubeconfig: Path, log: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, "--nats-url", nats_url, "--kubeconfig", str(kubeconfig),
        "--replica-id", f"{module}-0", cwd=REPO, stdout=log.open("wb"), stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPO)})


async def test_services_as_processes_close_the_loop(nats_server: NatsServer, kubeconfig: Path,
                                                    tmp_path: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    procs = [await _spawn("watcher", nats_server.url, kubeconfig, tmp_path / "watcher.log"),
             await _spawn("command_executor", nats_server.url, kubeconfig, tmp_path / "executor.log")]
    try:
        kubectl = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f",
            str(SAMPLES / "ray-cluster.sample.yaml"), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        out, _ = await kubectl.communicate()
        assert kubectl.returncode == 0, out.decode()
        name = "raycluster-kuberay"
        raw = await until(lambda: last_msg(js, s.STREAM_OBJECTS, s.object_subject("raycluster", "default", name)),
                          timeout=30, what="RayCluster ObjectEvent from the watcher process")
        cluster = ObjectEvent.model_validate_json(raw.data)
        await until(lambda: last_msg(js, s.trigger_stream(s.Controller.CLUSTER), s.trigger_subject(
            s.Controller.CLUSTER, namespace="default", name=name)), what="cluster trigger")
        # The head Pod the decision code builds for the live RayCluster (admission rebuilds it)
        model = with_defaults(RayCluster.model_validate(cluster.object))
        head_name = head_pod_name_prefix(model, settings=OperatorSettings()) + "bbbbb"
        head = head_pod_manifest(model, settings=OperatorSettings(), name=head_name,
                                 cluster_hash=cluster_spec_hash(model))
        await publish_commands(js, CommandBatch(
            key=ObjectKey(namespace="default", name=name), kind="raycluster", uid=cluster.uid,
            controller="cluster", reconcile_id="e2e-1",
            commands=[CreateObject(reason=f"Created head Pod default/{head_name}", object=head,
                                   event_reason="CreatedHeadPod")]))

        async def pod_event() -> ObjectEvent | None:
            raw = await last_msg(js, s.STREAM_OBJECTS, s.object_subject("pod", "default", head_name))
            return ObjectEvent.model_validate_json(raw.data) if raw is not None else None

        event = await until(pod_event, timeout=30, what="head pod created by executor, seen by watcher")
        assert event.object["metadata"]["labels"]["ray.io/node-type"] == "head"
        assert event.object["metadata"]["ownerReferences"][0]["uid"] == cluster.uid
        # The executor reports after recording the Event, possibly after the watcher saw the pod.
        await until(lambda: last_msg(js, s.STREAM_OUTCOMES, s.outcome_subject("cluster", "default", name)),
                    what="the executor's Outcome")
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 10)
        await nc.close()
    for log in ("watcher.log", "executor.log"):
        text = (tmp_path / log).read_text()
        assert "Traceback" not in text, text[-3000:]
        assert "raybus-sim" not in text  # the kubeconfig token never reaches a log line
