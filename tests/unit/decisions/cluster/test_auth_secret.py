"""reconcileAuthSecret: the token Secret of an ``authOptions.mode: token`` cluster (issue 13 item 1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raybus.decisions.cluster.auth_secret import build_auth_secret
from raybus.decisions.cluster.reconcile import ClusterDecision, ClusterSnapshot, reconcile_cluster
from raybus.decisions.commands import CreateObject
from tests.unit.decisions.cluster.test_reconcile_helpers import SETTINGS, apply, creates, later, make_cluster

TOKEN = {"authOptions": {"mode": "token"}, "rayVersion": "2.53.0"}


def decide(snapshot: ClusterSnapshot, seconds: float = 0) -> ClusterDecision:
    return reconcile_cluster(snapshot, settings=SETTINGS, now=later(seconds), entropy="e")


def secret_creates(d: ClusterDecision) -> list[CreateObject]:
    return creates(d, "Secret")


def ray_env(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in pod["spec"]["containers"][0].get("env") or []}


def test_token_mode_creates_the_cluster_named_secret_without_a_value() -> None:
    d = decide(ClusterSnapshot(cluster=make_cluster(**TOKEN)))
    (create,) = secret_creates(d)
    secret = create.object
    assert secret["metadata"]["name"] == "demo"
    assert secret["metadata"]["labels"] == {"ray.io/cluster": "demo"}
    assert secret["metadata"]["ownerReferences"][0] | {} == {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "demo", "uid": "uid-1",
        "controller": True, "blockOwnerDeletion": True,
    }
    # The executor generates the value: nothing secret is in the command (so not on the bus).
    assert create.generated_data_keys == ("auth_token",)
    assert "data" not in secret and "stringData" not in secret
    assert "auth_token" not in json.dumps(secret)
    # KubeRay's order: Ingress, auth Secret, then the head Service; then the Pods reference it.
    order = [c.object["kind"] for c in d.commands if isinstance(c, CreateObject)]
    assert order.index("Secret") < order.index("Service") < order.index("Pod")
    for pod in creates(d, "Pod"):
        ref = ray_env(pod.object)["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "demo", "key": "auth_token"}


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({}, "auth disabled"),
        ({"authOptions": {"mode": "disabled"}, "rayVersion": "2.53.0"}, "mode disabled"),
        ({"authOptions": {"mode": "token", "secretName": "mine"}, "rayVersion": "2.53.0"}, "user Secret"),
        ({"authOptions": {"mode": "token", "enableK8sTokenAuth": True}, "rayVersion": "2.55.0"}, "k8s tokens"),
    ],
)
def test_no_secret_without_generated_token_auth(spec: dict[str, Any], why: str) -> None:
    assert secret_creates(decide(ClusterSnapshot(cluster=make_cluster(**spec)))) == [], why


def test_user_secret_is_referenced_by_the_pods() -> None:
    cluster = make_cluster(authOptions={"mode": "token", "secretName": "mine"}, rayVersion="2.53.0")
    for pod in creates(decide(ClusterSnapshot(cluster=cluster)), "Pod"):
        assert ray_env(pod.object)["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "mine"


def test_existing_secret_is_never_recreated_even_if_not_ours() -> None:
    cluster = make_cluster(**TOKEN)
    existing = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "demo", "namespace": "ns"}}
    assert secret_creates(decide(ClusterSnapshot(cluster=cluster, secrets=[existing]))) == []


def test_long_cluster_name_is_cut_like_check_name() -> None:
    name = "a" * 52 + "b"
    cluster = make_cluster(name=name, **TOKEN)
    assert build_auth_secret(cluster)["metadata"]["name"] == name[-50:]


@settings(max_examples=40, deadline=None)
@given(lost=st.lists(st.booleans(), min_size=1, max_size=8))
def test_secret_is_created_until_seen_then_never_again(lost: list[bool]) -> None:
    """Rounds whose create has no answer yet re-issue the same value-less create (the API server
    answers 409 and keeps the first token); once a create is answered no round creates it."""
    snapshot = ClusterSnapshot(cluster=make_cluster(**TOKEN))
    seen = False
    for i, drop in enumerate(lost):
        d = decide(snapshot, seconds=i * 5)
        made = secret_creates(d)
        assert (made == []) == seen
        assert all(c.object == build_auth_secret(snapshot.cluster) for c in made)
        nxt = apply(snapshot, d)
        if drop:  # the create's Outcome has not arrived yet
            nxt = nxt.model_copy(update={"secrets": snapshot.secrets})
        snapshot = nxt
        seen = bool(snapshot.secrets)
