"""A batch applies in order and stops at its first failed step; only worker Pods of one group are
created side by side (KubeRay: SA, Role, RoleBinding, Services, head Pod, then each group)."""

from __future__ import annotations

from typing import Any

import pytest

from command_executor.executor import _steps
from raybus.decisions.commands import CreateObject


def _create(kind: str, name: str, *, node_type: str | None = None, group: str = "") -> CreateObject:
    labels = {"ray.io/node-type": node_type, "ray.io/group": group} if node_type else {}
    obj: dict[str, Any] = {"kind": kind, "metadata": {"name": name, "labels": labels}}
    return CreateObject(reason="r", object=obj)


SA, ROLE, BINDING = _create("ServiceAccount", "sa"), _create("Role", "r"), _create("RoleBinding", "rb")
SVC, HEAD = _create("Service", "svc"), _create("Pod", "head", node_type="head", group="headgroup")
A1, A2, A3 = (_create("Pod", f"a{i}", node_type="worker", group="a") for i in range(3))
B1 = _create("Pod", "b1", node_type="worker", group="b")


@pytest.mark.parametrize(("commands", "parallelism", "expected"), [
    ([SA, ROLE, BINDING, SVC, HEAD, A1, A2, B1], 8, [[SA], [ROLE], [BINDING], [SVC], [HEAD], [A1, A2], [B1]]),
    ([HEAD, A1], 8, [[HEAD], [A1]]),  # a rejected head must stop the batch before any worker
    ([A1, A2, A3], 2, [[A1, A2], [A3]]),
    ([A1, A2, A3], 1, [[A1], [A2], [A3]]),  # KubeRay's strict order
    ([A1, SVC, A2], 8, [[A1], [SVC], [A2]]),  # never reordered across another command
])
def test_steps(commands: list[CreateObject], parallelism: int, expected: list[list[CreateObject]]) -> None:
    assert _steps(list(commands), parallelism) == expected
