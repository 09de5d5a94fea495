"""Chaos soak: `python -m tests.chaos.soak --minutes N --seed S` (`make chaos CHAOS_ARGS=...`).

The whole local stack (2 replicas of every reconciler, NATS as a 3-node JetStream cluster with
every stream on all nodes) runs a mixed RayCluster workload (creates, scale up/down,
autoscaler-style `workersToDelete` patches, deletes) while a fault injector, driven by the seed,
SIGKILLs and restarts raybus processes, one NATS node at a time, Redis, the simulated API
server, makes the API server answer 429 / 500 or time out for a few seconds, and makes simulated
Ray heads time out or answer garbage. A recorder watches every ray
Pod throughout. Exit 0 only when every invariant held; each breach is printed with its evidence.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import nats

from raybus.adapters.kube import KubeClient, KubeError, new_api_client
from raybus.bus import subjects as s
from raybus_sim.devstack.stack import SERVICES, LocalStack
from raybus_sim.testing.servers import NatsCluster
from tests.chaos.checks_ray import RayPart, enable_journal, fault_logger
from tests.chaos.recorder import PodRecorder, Violation
from tests.integration.e2e.conftest import Kube

PREFIX = "soak-"
FAULTS = ["service", "service", "nats-node", "redis", "apiserver", "apiserver-errors", "head"]
HEAD_FAULTS = ["timeout", "invalid_json", "html_502", "reset"]
API_FAULTS = ["429", "500", "timeout"]  # sim/raybus_sim/apiserver/faults.py


class Soak:
    def __init__(self, stack: LocalStack, kube: Kube, rng: random.Random) -> None:
        self.stack, self.kube, self.rng = stack, kube, rng
        self.faults: list[str] = []
        self.ops: dict[str, int] = {}
        self.last_fault = time.monotonic()

    def _op(self, name: str) -> None:
        self.ops[name] = self.ops.get(name, 0) + 1

    async def clusters(self) -> list[str]:
        items, _ = await self.kube.c.list_all(self.kube_rc(), namespace="default")
        return [i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith(PREFIX)
                and not i["metadata"].get("deletionTimestamp")]

    @staticmethod
    def kube_rc() -> Any:
        from tests.integration.e2e.conftest import RC
        return RC

    # --- workload ---------------------------------------------------------------------------
    async def workload(self, until: float) -> None:
        serial = 0
        while time.monotonic() < until:
            try:
                names = await self.clusters()
                roll = self.rng.random()
                if len(names) < 3 or (roll < 0.15 and len(names) < 6):
                    serial += 1
                    n = self.rng.randint(0, 4)
                    await self.kube.apply_cluster(f"{PREFIX}{serial}", mutate=_workers(n))
                    self._op("create")
                elif roll < 0.55:
                    await self._scale(self.rng.choice(names), self.rng.randint(0, 5))
                elif roll < 0.85:
                    await self._workers_to_delete(self.rng.choice(names))
                else:
                    await self.kube.c.delete(self.kube_rc(), namespace="default", name=self.rng.choice(names))
                    self._op("delete")
            except (KubeError, httpx.HTTPError, OSError) as err:
                self._op(f"error:{type(err).__name__}")  # the API server may be down (a fault)
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))

    async def _scale(self, name: str, replicas: int) -> None:
        rc = await self.kube.cluster(name)
        groups = rc["spec"]["workerGroupSpecs"]
        groups[0]["replicas"] = replicas
        groups[0].pop("scaleStrategy", None)
        await self.kube.patch_cluster(name, {"spec": {"workerGroupSpecs": groups}})
        self._op("scale")

    async def _workers_to_delete(self, name: str) -> None:
        """What the Ray autoscaler does to remove idle workers: name them and lower replicas."""
        workers = [p["metadata"]["name"] for p in await self.kube.pods(name, node_type="worker")]
        if not workers:
            return
        doomed = self.rng.sample(workers, self.rng.randint(1, len(workers)))
        rc = await self.kube.cluster(name)
        groups = rc["spec"]["workerGroupSpecs"]
        groups[0]["replicas"] = max(0, int(groups[0].get("replicas", 0)) - len(doomed))
        groups[0]["scaleStrategy"] = {"workersToDelete": doomed}
        await self.kube.patch_cluster(name, {"spec": {"workerGroupSpecs": groups}})
        self._op("workersToDelete")

    # --- faults -----------------------------------------------------------------------------
    async def injector(self, until: float) -> None:
        # Every kind once first (in a seeded order), then at random: even a short soak covers all.
        first = sorted(set(FAULTS))
        self.rng.shuffle(first)
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(4.0, 12.0))
            if time.monotonic() >= until:
                break
            kind = first.pop() if first else self.rng.choice(FAULTS)
            try:
                detail = await self._fault(kind)
            except Exception as err:  # noqa: BLE001 - a fault that could not be injected is reported
                detail = f"injection failed: {type(err).__name__}: {err}"
            self.faults.append(f"{time.strftime('%H:%M:%S')} {kind} {detail}")
            print(f"fault: {self.faults[-1]}", flush=True)
            self.last_fault = time.monotonic()

    async def _fault(self, kind: str) -> str:
        st = self.stack
        if kind == "service":
            name = self.rng.choice([p.name for p in st.procs if p.argv[1:3] in (["-m", x] for x in SERVICES)])
            await asyncio.to_thread(st.restart, name, kill=True)
            return f"SIGKILL {name}"
        if kind == "nats-node":
            assert isinstance(st.nats, NatsCluster)
            i = self.rng.randrange(len(st.nats.nodes))
            await asyncio.to_thread(st.nats.wait_healthy)  # never the quorum: others are all up
            st.nats.nodes[i].stop(kill=True)
            await asyncio.sleep(self.rng.uniform(2.0, 8.0))
            await asyncio.to_thread(st.nats.nodes[i].start)
            return f"SIGKILL nats-{i}, restarted"
        if kind == "redis":
            assert st.redis is not None
            st.redis.stop(kill=True)
            await asyncio.sleep(self.rng.uniform(0.5, 3.0))
            await asyncio.to_thread(st.redis.start)
            return "SIGKILL redis, restarted"
        if kind == "apiserver":
            # SIGTERM: the simulator writes its state file on the way out (a real API server's
            # etcd keeps its state); the heads it also simulates restart with it.
            await asyncio.to_thread(st.restart, "kube-sim")
            return "restart kube-sim (API server + heads)"
        if kind == "apiserver-errors":
            # The API server throttles (429 + Retry-After), fails (500) or hangs (504) raybus's
            # requests for a few seconds; the fault is over (last_fault) when the switch is.
            fault, seconds = self.rng.choice(API_FAULTS), self.rng.uniform(3.0, 8.0)
            ratio = self.rng.choice([0.5, 1.0])
            async with httpx.AsyncClient() as http:
                r = await http.post(f"{st.api_url}/sim/apiserver/faults", json={
                    "kind": fault, "seconds": seconds, "ratio": ratio, "hang_s": 3.0})
                await asyncio.sleep(seconds)
                served = (await http.get(f"{st.api_url}/sim/apiserver/faults")).json()["served"]
            return f"{fault} x{ratio} for {seconds:.1f}s ({r.status_code}, served {served})"
        names = await self.clusters()
        if not names:
            return "no cluster"
        name, fault = self.rng.choice(names), self.rng.choice(HEAD_FAULTS)
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{st.dashboard_url}/sim/dashboards/default/{name}/faults",
                                json={"kind": fault, "count": self.rng.randint(1, 5), "sleep_s": 3.0})
        return f"head {name}: {fault} ({r.status_code})"

    # --- invariants after the faults --------------------------------------------------------
    async def converged(self, timeout: float) -> list[Violation]:
        deadline = time.monotonic() + timeout
        pending: dict[str, str] = {}
        while time.monotonic() < deadline:
            pending = {}
            try:
                for name in await self.clusters():
                    rc = await self.kube.cluster(name)
                    want = int(rc["spec"]["workerGroupSpecs"][0].get("replicas", 0))
                    heads = await self.kube.pods(name, node_type="head")
                    workers = await self.kube.pods(name, node_type="worker")
                    state = (rc.get("status") or {}).get("state")
                    if len(heads) != 1 or len(workers) != want or state != "ready":
                        pending[name] = f"heads={len(heads)} workers={len(workers)}/{want} state={state}"
            except (KubeError, httpx.HTTPError, OSError) as err:
                pending["api"] = str(err)
            if not pending:
                return []
            await asyncio.sleep(1.0)
        return [Violation(f"every object converges within {timeout:.0f}s after the last fault",
                          json.dumps(pending))]

    async def steady(self, seconds: float) -> list[Violation]:
        """Once settled, it stays so: never more workers than desired, exactly one head."""
        out: list[Violation] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for name in await self.clusters():
                rc = await self.kube.cluster(name)
                want = int(rc["spec"]["workerGroupSpecs"][0].get("replicas", 0))
                workers = len(await self.kube.pods(name, node_type="worker"))
                heads = len(await self.kube.pods(name, node_type="head"))
                if workers > want or heads != 1:
                    out.append(Violation("never more workers than desired once settled",
                                         f"{name}: workers={workers} desired={want} heads={heads}"))
            await asyncio.sleep(1.0)
        return out

    async def streams_empty(self) -> list[Violation]:
        assert self.stack.nats is not None
        nc = await nats.connect(**self.stack.nats.options())
        try:
            js = nc.jetstream()
            counts = {name: (await js.stream_info(name)).state.messages
                      for name in (s.STREAM_COMMANDS, s.STREAM_STATUS)}
        finally:
            await nc.close()
        return [Violation("no message stuck in a stream", json.dumps(counts))] if any(counts.values()) else []


def _workers(n: int) -> Any:
    def mutate(body: dict[str, Any]) -> None:
        body["spec"]["workerGroupSpecs"][0].update(replicas=n, minReplicas=0, maxReplicas=10)
    return mutate


async def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    home = Path(args.home or tempfile.mkdtemp(prefix="raybus-chaos-"))
    stack = LocalStack(home=home, replicas=2, nats_nodes=args.nats_nodes)
    print(f"chaos soak: seed={args.seed} minutes={args.minutes} nats_nodes={args.nats_nodes} home={home}", flush=True)
    if getattr(args, "ray", True):
        enable_journal(stack)  # RayJobs/RayServices too (checks_ray.py)
    await asyncio.to_thread(stack.start)
    violations: list[Violation] = []
    converge_s: float | None = None
    late: dict[str, list[str]] = {}
    soak: Soak | None = None
    recorder: PodRecorder | None = None
    client: KubeClient | None = None
    ray: RayPart | None = None
    try:
        client = KubeClient(await new_api_client(str(stack.kubeconfig)))
        recorder = PodRecorder(KubeClient(await new_api_client(str(stack.kubeconfig))), PREFIX)
        await recorder.start()
        soak = Soak(stack, Kube(client, stack), rng)
        if getattr(args, "ray", True):
            ray = RayPart(stack, Kube(client, stack), args.seed, fault_logger(soak))
            await ray.start()
        until = time.monotonic() + args.minutes * 60
        await asyncio.gather(soak.workload(until), soak.injector(until), *([ray.workload.run(until)] if ray else []))
        print("faults over; waiting for convergence", flush=True)
        started = time.monotonic()
        violations += await soak.converged(args.converge_s)
        converge_s = time.monotonic() - soak.last_fault
        print(f"converged {converge_s:.1f}s after the last fault "
              f"(checking from {started - soak.last_fault:.1f}s)", flush=True)
        violations += await soak.steady(10.0)
        violations += await soak.streams_empty()
        violations += recorder.violations + recorder.duplicate_heads()
        late = recorder.heads_after_delete()
        violations += [Violation("at most one head Pod created after its RayCluster's deletion",
                                 f"{cluster}: {names}") for cluster, names in late.items() if len(names) > 1]
        if ray is not None:
            violations += await ray.check(args.converge_s, soak.last_fault, recorder)
    finally:
        if ray is not None:
            await ray.stop()
        if recorder is not None:
            await recorder.stop()
            await recorder.client.close()
        if client is not None:
            await client.close()
        await asyncio.to_thread(stack.stop)
    left = [p.name for p in stack.procs if p.popen.poll() is None]
    servers = [*(stack.nats.nodes if isinstance(stack.nats, NatsCluster) else [stack.nats]), stack.redis]
    left += [str(srv.argv[0]) for srv in servers if srv is not None and srv.proc is not None and srv.proc.poll() is None]
    if left:
        violations.append(Violation("no process left running after the soak", ", ".join(left)))
    violations += ray.after_stop() if ray is not None else []
    summary = {"seed": args.seed, "minutes": args.minutes, "nats_nodes": args.nats_nodes,
               "faults": len(soak.faults) if soak else 0,
               "fault_kinds": sorted({f.split()[1] for f in soak.faults}) if soak else [],
               "faults_per_kind": dict(Counter(f.split()[1] for f in soak.faults)) if soak else {},
               "converged_s_after_last_fault": round(converge_s, 1) if converge_s is not None else None,
               "clusters": len(recorder.created) if recorder else 0,
               "heads_created": sum(map(len, recorder.heads_created.values())) if recorder else 0,
               "heads_created_after_cluster_deleted": late,
               "ops": soak.ops if soak else {}, "pod_events": recorder.events if recorder else 0,
               "watch_relists": recorder.watch_breaks if recorder else 0,
               "ray": ray.summary if ray else None,
               "violations": [v.__dict__ for v in violations]}
    print(json.dumps(summary, indent=2))
    (home / "soak-result.json").write_text(json.dumps(summary, indent=2))
    return 1 if violations else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nats-nodes", type=int, default=3)
    parser.add_argument("--converge-s", type=float, default=120.0)
    parser.add_argument("--home", default=None)
    parser.add_argument("--no-ray", dest="ray", action="store_false", help="RayClusters only (no workload_jobs.py)")
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
