"""What a refused batch leaves behind: the DLQ copy keeps no Secret value, the log line no body."""

from __future__ import annotations

import json

from command_executor.admission import redacted, summary
from raybus.bus.envelopes import CommandBatch, ObjectKey
from raybus.decisions.commands import CreateObject, DeleteObject, ObjectRef


def forged() -> CommandBatch:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
              "data": {"token": "c2VjcmV0LXZhbHVl"}, "stringData": {"password": "hunter2"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "evil", "env": [{"name": "X", "value": "hunter2"}]}]}}
    return CommandBatch(key=ObjectKey(namespace="default", name="rc"), kind="raycluster", controller="cluster",
                        reconcile_id="r", commands=[CreateObject(reason="x", object=secret),
                                                    CreateObject(reason="x", object=pod),
                                                    CreateObject(reason="x", object=pod),
                                                    DeleteObject(reason="x", target=ObjectRef(
                                                        api_version="v1", kind="Pod", namespace="default",
                                                        name="q"))])


def test_dlq_copy_drops_secret_values_and_keeps_the_rest() -> None:
    body = redacted(forged())
    assert b"c2VjcmV0LXZhbHVl" not in body and b'"password": "<redacted>"' in body
    decoded = CommandBatch.model_validate(json.loads(body))
    secret = decoded.commands[0]
    assert isinstance(secret, CreateObject) and secret.object["data"] == {"token": "<redacted>"}
    assert decoded.commands[1:] == forged().commands[1:]  # a non-Secret body is kept for humans


def test_log_summary_names_ops_and_kinds_only() -> None:
    text = summary(forged())
    assert text == "2x create Pod, 1x create Secret, 1x delete Pod"
    assert "hunter2" not in text and "evil" not in text
