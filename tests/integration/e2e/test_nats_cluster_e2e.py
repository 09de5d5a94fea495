"""The whole stack on a 3-node NATS JetStream cluster (as installed: every stream and KV bucket on
all three nodes), with the node leading the commands stream SIGKILLed mid-convergence and started
again: clients reconnect to another node, the stream elects a new leader, and every RayCluster
still ends with exactly one head and its workers (a pod watch proves no Pod was ever created
twice)."""

from __future__ import annotations

from collections.abc import Iterator

import nats
import pytest

from raybus.bus import subjects as s
from raybus_sim.devstack.stack import LocalStack
from raybus_sim.testing.servers import NatsCluster
from tests.integration.e2e.conftest import Kube
from tests.integration.e2e.test_raycluster import _workers
from tests.integration.e2e.test_restarts import _exactly, _ledger, _some_pods_exist

# make test-long (a three-node NATS stack of its own; make chaos-short kills NATS nodes of a three-node bus in make test).
pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """This module's own stack (it overrides the session one): 3 NATS nodes, 2 reconcilers each."""
    st = LocalStack(home=tmp_path_factory.mktemp("stack3"), replicas=2, nats_nodes=3)
    try:
        st.start()
        yield st
    finally:
        st.stop()


async def _leader(cluster: NatsCluster, stream: str) -> int:
    nc = await nats.connect(**cluster.options())
    try:
        info = (await nc.jetstream().stream_info(stream)).cluster
        assert info is not None and info.leader is not None
        return int(info.leader.removeprefix("nats-"))
    finally:
        await nc.close()


async def test_streams_are_replicated_on_three_nodes(stack: LocalStack) -> None:
    assert isinstance(stack.nats, NatsCluster)
    assert stack.env["RAYBUS_NATS_URL"].count(",") == 2  # services know every node
    nc = await nats.connect(**stack.nats.options())
    try:
        js = nc.jetstream()
        for stream in (s.STREAM_COMMANDS, s.STREAM_STATUS, f"KV_{s.KV_BATCHES}"):
            info = await js.stream_info(stream)
            assert info.config.num_replicas == 3, stream
            assert info.cluster is not None and len(info.cluster.replicas or []) == 2, stream
    finally:
        await nc.close()


async def test_nats_leader_killed_mid_convergence(kube: Kube, stack: LocalStack) -> None:
    assert isinstance(stack.nats, NatsCluster)
    names = [f"e2e-natsc-{i}" for i in range(3)]
    ledger = await _ledger(stack, "e2e-natsc-")
    try:
        for n in names:
            await kube.apply_cluster(n, mutate=_workers(4))
        await _some_pods_exist(kube, names)
        down = await _leader(stack.nats, s.STREAM_COMMANDS)
        stack.nats.nodes[down].stop(kill=True)  # SIGKILL: no lame-duck hand-over

        async def new_leader() -> bool:
            try:
                return await _leader(stack.nats, s.STREAM_COMMANDS) != down
            except (nats.errors.Error, TimeoutError, AssertionError):  # mid-election: no leader yet
                return False
        await kube.eventually(new_leader, timeout=30, what="a new commands stream leader")
        stack.nats.nodes[down].start()  # its JetStream state is on disk; it catches up
        await _exactly(kube, ledger, names, 4)
        stack.nats.wait_healthy()
        # And the bus still carries new work after the node came back.
        rc = await kube.cluster(names[0])
        groups = rc["spec"]["workerGroupSpecs"]
        groups[0]["replicas"] = 2
        await kube.patch_cluster(names[0], {"spec": {"workerGroupSpecs": groups}})
        await kube.wait_ready(names[0], workers=2, timeout=60)
        await kube.settled(names[0])
    finally:
        await ledger.stop()
