"""Fixtures of `make test-node`: one node for the whole run, raybus installed on it once.

Nothing here runs under `make test`: the checks are check_*.py files, which pytest collects only
when named (the Makefile's test-node target)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.node import addons, images, install, teardown
from tests.node import node as nodemod
from tests.node.node import Node

TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="session")
def node() -> Iterator[Node]:
    started = time.monotonic()
    tags = images.build_all()
    TIMINGS["images built"] = time.monotonic() - started
    up = time.monotonic()
    the_node = nodemod.start(import_images=lambda n: images.import_into(n, tags))
    addons.install(the_node)
    TIMINGS["node up (containerd import, kubelet Ready, kube-dns)"] = time.monotonic() - up
    try:
        yield the_node
    finally:
        down = time.monotonic()
        teardown.teardown(the_node)
        TIMINGS["teardown"] = time.monotonic() - down
        for what, seconds in TIMINGS.items():
            print(f"node timing: {what}: {seconds:.0f} s")
        left = teardown.leftovers()
        assert not left, f"the node left these behind: {left}"


@pytest.fixture(scope="session")
def raybus(node: Node) -> Node:
    started = time.monotonic()
    install.install_raybus(node)
    TIMINGS["raybus installed and Ready"] = time.monotonic() - started
    return node
