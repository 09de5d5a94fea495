"""The executor fills a Secret's generated keys with a fresh token at create time (issue 13 item 1):
the command (and so the bus, the ledger, the logs) never holds the value."""

from __future__ import annotations

import base64
from typing import Any

from command_executor.executor import Executor
from raybus.adapters.kube import Resource
from raybus.bus.envelopes import CommandBatch, ObjectKey
from raybus.decisions.commands import CreateObject

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rc", "namespace": "ns"}, "type": "Opaque"}


class RecordingKube:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def create(self, res: Resource, body: dict[str, Any], *, namespace: str | None) -> dict[str, Any]:
        self.bodies.append(body)
        return body


def _batch(cmd: CreateObject) -> CommandBatch:
    return CommandBatch(key=ObjectKey(namespace="ns", name="rc"), kind="raycluster", uid="u1",
                        controller="cluster", reconcile_id="r1", commands=[cmd])


async def test_generated_keys_get_a_fresh_token_each_create_and_the_command_stays_clean() -> None:
    kube = RecordingKube()
    cmd = CreateObject(reason="r", object=SECRET, generated_data_keys=("auth_token",))
    for _ in range(2):
        out = await Executor(kube).apply(_batch(cmd))  # type: ignore[arg-type]
        assert out.results[0].ok and out.results[0].message == ""
    tokens = [base64.b64decode(b["data"]["auth_token"]) for b in kube.bodies]
    assert all(len(t) >= 32 for t in tokens) and tokens[0] != tokens[1]  # random, never derived
    assert "data" not in cmd.object  # the command (what travels and is logged) never had it
    assert all(t.decode() not in cmd.model_dump_json() for t in tokens)


async def test_without_generated_keys_the_manifest_is_sent_as_is() -> None:
    kube = RecordingKube()
    await Executor(kube).apply(_batch(CreateObject(reason="r", object=SECRET)))  # type: ignore[arg-type]
    assert "data" not in kube.bodies[0]
