"""End-to-end fixtures: the whole stack as real processes (nats-server, redis-server, the local
API server with kubelet and dashboards, every raybus service), reached only over HTTP/NATS.

Every e2e test runs on the local API server (`[local]`); the suites in REAL_SERVER_SUITES also run
on a real kube-apiserver + kube-controller-manager (`[real]`, raybus_sim.testing.envtest, one per pytest
run) with the simulated node and dashboards as its API clients, same test code. On both, the
watcher and the command-executor use their ServiceAccounts' tokens bound to the RBAC of the
install, so a missing permission fails a test."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
import yaml

from raybus.adapters.kube import KubeClient, KubeError, new_api_client, resource_for
from raybus.bus import subjects as s
from raybus.decisions.cluster.expectations import ScaleExpectations
from raybus_sim.devstack.stack import LocalStack

REPO = Path(__file__).resolve().parents[3]
SAMPLE = yaml.safe_load((REPO / "deploy/samples/ray-cluster.sample.yaml").read_text())
RC = resource_for("ray.io/v1", "RayCluster")
POD = resource_for("v1", "Pod")
EVENT = resource_for("v1", "Event")
NS = "default"
# The suites (modules) that also run against the real control plane; the others run on the local
# API server only. Within CI's budget `make test` runs the smoke ones on both servers; the rest run
# on the real one in `make test-long` (marker `long`), before an issue is resolved.
REAL_SERVER_SUITES = frozenset({"test_raycluster", "test_rayjob", "test_rayservice", "test_restarts",
                                "test_failures", "test_samples_converge"})
REAL_SERVER_SMOKE = frozenset({"test_raycluster", "test_failures"})


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "stack" not in metafunc.fixturenames:
        return
    suite = metafunc.module.__name__.rsplit(".", 1)[-1]
    real = pytest.param("real", marks=() if suite in REAL_SERVER_SMOKE else pytest.mark.long)
    # KubeRay's own e2e suite (kuberay_v17/) runs on both servers; on the real one as `long`.
    if "kuberay_v17" in metafunc.module.__name__:
        real = pytest.param("real", marks=pytest.mark.long)
    both = suite in REAL_SERVER_SUITES or "kuberay_v17" in metafunc.module.__name__
    servers = ["local", real] if both else ["local"]
    # Package scope: the real server's stack (and its node, which runs every unbound Pod) is gone
    # before other tests use the same control plane (tests/integration/realapi expects no kubelet).
    metafunc.parametrize("stack", servers, indirect=True, scope="package")


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[LocalStack]:
    # Two cluster-reconciler replicas throughout: every e2e test also checks that sharing the
    # work never produces duplicates.
    # Alpha gates on, so the samples of alpha features (mTLS, NetworkPolicy, history server)
    # are accepted, as with a KubeRay started with those --feature-gates.
    gates = "RayClusterMTLS=true,RayClusterNetworkPolicy=true,RayClusterHistoryServer=true"
    server = getattr(request, "param", "local")
    admin = None
    if server == "real":  # the session's control plane, started on first use
        admin = request.getfixturevalue("control_plane").admin_kubeconfig
    s = LocalStack(home=tmp_path_factory.mktemp(f"stack-{server}"), replicas=2,
                   extra_env={"RAYBUS_FEATURE_GATES": gates}, apiserver_kubeconfig=admin)
    try:
        s.start()
        yield s
    finally:
        s.stop()


class Kube:
    """What a user does with kubectl, over the Kubernetes API."""

    def __init__(self, client: KubeClient, stack: LocalStack) -> None:
        self.c = client
        self.stack = stack

    async def apply_cluster(self, name: str, *, mutate: Callable[[dict[str, Any]], None] | None = None,
                            ) -> dict[str, Any]:
        body = copy.deepcopy(SAMPLE)
        body["metadata"] = {"name": name, "namespace": NS}
        if mutate:
            mutate(body)
        return await self.c.create(RC, body, namespace=NS)

    async def cluster(self, name: str) -> dict[str, Any]:
        return await self.c.get(RC, namespace=NS, name=name)

    async def patch_cluster(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self.c.merge_patch(RC, namespace=NS, name=name, patch=patch)

    async def pods(self, cluster: str, *, node_type: str | None = None) -> list[dict[str, Any]]:
        selector = f"ray.io/cluster={cluster}" + (f",ray.io/node-type={node_type}" if node_type else "")
        items, _ = await self.c.list_all(POD, namespace=NS, label_selector=selector)
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    async def events(self, name_prefix: str, reason: str) -> list[dict[str, Any]]:
        items, _ = await self.c.list_all(EVENT, namespace=NS)
        return [e for e in items if e.get("reason") == reason
                and e.get("involvedObject", {}).get("name", "").startswith(name_prefix)]

    async def event_count(self, name_prefix: str, reason: str) -> int:
        """Occurrences, not Event objects: like client-go, the executor folds identical Events
        into one with a growing series count."""
        # events.k8s.io/v1 (as KubeRay v1.7 records them): a repeat is series.count, shown as such
        # in the core/v1 view too.
        return sum(int((e.get("series") or {}).get("count") or e.get("count") or 1)
                   for e in await self.events(name_prefix, reason))

    async def delete_pod(self, name: str) -> None:
        await self.c.delete(POD, namespace=NS, name=name)

    async def sim(self, path: str, body: dict[str, Any] | None = None) -> None:
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{self.stack.sim_url}/sim/{path}", json=body or {})
            r.raise_for_status()

    async def eventually(self, check: Callable[[], Awaitable[bool]], *, timeout: float = 30.0,
                         what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if await check():
                    return
            except KubeError:
                pass
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    async def settled(self, cluster: str, *, timeout: float = 60.0) -> None:
        """Positive evidence that nothing more is coming for a RayCluster (instead of sleeping and
        hoping): no command batch or status write queued for the executor, and no scale
        expectation outstanding for the cluster in Redis."""
        assert self.stack.nats is not None and self.stack.redis is not None
        nc = await nats.connect(**self.stack.nats.options())
        rds = self.stack.redis.client()
        try:
            async def quiet() -> bool:
                js = nc.jetstream()
                queued = sum([(await js.stream_info(stream)).state.messages
                              for stream in (s.STREAM_COMMANDS, s.STREAM_STATUS)])
                raw = await rds.get(f"raybus:expectations:{NS}/{cluster}")
                pending = raw is not None and not ScaleExpectations.model_validate_json(raw).is_empty()
                return queued == 0 and not pending
            await self.eventually(quiet, timeout=timeout, what=f"{cluster} settled")
        finally:
            await rds.aclose()
            await nc.close()

    async def wait_ready(self, name: str, *, workers: int, timeout: float = 30.0) -> dict[str, Any]:
        async def ready() -> bool:
            rc = await self.cluster(name)
            pods = await self.pods(name)
            running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            return ((rc.get("status") or {}).get("state") == "ready" and len(running) == workers + 1
                    and len(pods) == workers + 1)

        await self.eventually(ready, timeout=timeout, what=f"{name} ready with {workers} workers")
        return await self.cluster(name)


class WatchRecorder:
    """Lists one kind, then watches it from that resourceVersion for the whole test and hands every
    event to `record`: what a recorder keeps includes objects created and deleted again between
    two of the test's reads (a duplicate create cannot hide)."""

    def __init__(self, client: KubeClient, res: Any, *, label_selector: str | None = None) -> None:
        self._client = client
        self._res = res
        self._selector = label_selector
        self._task: asyncio.Task[None] | None = None

    def record(self, event_type: str, meta: dict[str, Any]) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        _, rv = await self._client.list_all(self._res, namespace=NS, label_selector=self._selector)
        self._task = asyncio.create_task(self._run(rv))

    async def _run(self, rv: str) -> None:
        while True:
            try:
                async for event in self._client.watch(self._res, resource_version=rv, namespace=NS,
                                                      label_selector=self._selector, timeout_s=600):
                    meta = event.object.get("metadata") or {}
                    rv = str(meta.get("resourceVersion") or rv)
                    if event.type != "BOOKMARK":
                        self.record(event.type, meta)
            except KubeError:
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


class PodLedger(WatchRecorder):
    """Every Pod ever created for clusters with a name prefix."""

    def __init__(self, client: KubeClient, prefix: str) -> None:
        super().__init__(client, POD, label_selector="ray.io/cluster")
        self._prefix = prefix
        self.created: dict[str, set[str]] = {}  # cluster -> pod names
        self.heads: dict[str, set[str]] = {}

    def record(self, event_type: str, meta: dict[str, Any]) -> None:
        cluster = (meta.get("labels") or {}).get("ray.io/cluster", "")
        if event_type != "ADDED" or not cluster.startswith(self._prefix):
            return
        self.created.setdefault(cluster, set()).add(meta["name"])
        if (meta.get("labels") or {}).get("ray.io/node-type") == "head":
            self.heads.setdefault(cluster, set()).add(meta["name"])

    async def stop(self) -> None:
        await super().stop()
        await self._client.close()


@pytest.fixture
async def kube(stack: LocalStack) -> AsyncIterator[Kube]:
    client = KubeClient(await new_api_client(str(stack.kubeconfig)))
    try:
        yield Kube(client, stack)
    finally:
        await client.close()
