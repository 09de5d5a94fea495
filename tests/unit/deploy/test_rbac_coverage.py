"""deploy/kustomize/base/rbac.yaml's RBAC is sufficient for what raybus does, derived from the code (raybus_calls):

- the command-executor's ClusterRole holds every rule of every Role/ClusterRole raybus creates, so a
  real API server lets it grant them (RBAC escalation prevention: "attempting to grant RBAC
  permissions not currently held", issue 9 item 2) and lets it bind them;
- every API call the executor makes for every command the decision code produces is allowed by the
  executor's ClusterRole, and every list/watch of the watcher by the watcher's.

Rules are evaluated with the local API server's RBAC implementation (raybus_sim.apiserver.rbac_rules:
upstream's RuleAllows and Covers).
"""

from __future__ import annotations

import asyncio
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from raybus.decisions.cluster.rbac import AUTOSCALER_RULES, build_autoscaler_rbac
from raybus.decisions.commands import Command, CreateObject
from raybus_sim.apiserver.rbac_rules import compact_string, covers, rule_allows
from tests.unit.decisions.cluster.test_pod_samples import CLUSTERS
from tests.unit.deploy.raybus_calls import Call, decided_commands, executor_calls, watcher_calls

REPO = Path(__file__).resolve().parents[3]
DOCS = list(yaml.safe_load_all((REPO / "deploy/kustomize/base/rbac.yaml").read_text()))
CLUSTER_ROLES = {d["metadata"]["name"]: d for d in DOCS if d["kind"] == "ClusterRole"}
EXECUTOR = CLUSTER_ROLES["raybus-command-executor"]["rules"]
WATCHER = CLUSTER_ROLES["raybus-watcher"]["rules"]


@cache
def commands() -> tuple[Command, ...]:
    return tuple(decided_commands())


@cache
def executed() -> tuple[frozenset[Call], tuple[str, ...]]:
    calls, failures = asyncio.run(executor_calls(list(commands())))
    return frozenset(calls), tuple(failures)


def _allowed(rules: list[dict[str, Any]], call: Call) -> bool:
    verb, group, resource, sub, name = call.attributes()
    return any(rule_allows(rule, verb, group, resource, sub, name) for rule in rules)


def _created_roles() -> list[tuple[str, dict[str, Any]]]:
    """Every Role/ClusterRole in the decisions' CreateObject commands, once per name."""
    roles = {c.object["metadata"]["name"]: c.object for c in commands()
             if isinstance(c, CreateObject) and c.object.get("kind") in ("Role", "ClusterRole")}
    return sorted(roles.items())


def test_service_accounts_are_bound_to_their_cluster_roles() -> None:
    bindings = {d["metadata"]["name"]: d for d in DOCS if d["kind"] == "ClusterRoleBinding"}
    for name in ("raybus-watcher", "raybus-command-executor"):
        assert bindings[name]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                             "name": name}
        assert bindings[name]["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "raybus-system"}]


def test_the_samples_make_raybus_create_roles() -> None:
    """The autoscaler samples' RayClusters (and the decisions for them) create the autoscaler Role."""
    autoscaling = [cluster for _, cluster in CLUSTERS if cluster.spec.enable_in_tree_autoscaling]
    assert len(autoscaling) >= 3
    built = [obj for cluster in autoscaling for obj in build_autoscaler_rbac(cluster) if obj["kind"] == "Role"]
    assert all(role["rules"] == [dict(r) for r in AUTOSCALER_RULES] for role in built)
    decided = dict(_created_roles())
    assert {role["metadata"]["name"] for role in built} <= set(decided)


@pytest.mark.parametrize(("name", "role"), _created_roles(), ids=[name for name, _ in _created_roles()])
def test_executor_holds_every_rule_of_every_role_raybus_creates(name: str, role: dict[str, Any]) -> None:
    held, missing = covers(EXECUTOR, role["rules"])
    assert held, f"{name}: the executor cannot grant {[compact_string(r) for r in missing]}"


def test_executor_ownership_is_not_a_shortcut() -> None:
    """The check is not vacuous: without pods/resize (the rule KubeRay's role.yaml has and issue 9 found
    missing) the autoscaler Role is refused."""
    trimmed = [r for r in EXECUTOR if r.get("resources") != ["pods/resize"]]
    held, missing = covers(trimmed, [dict(r) for r in AUTOSCALER_RULES])
    assert not held and [compact_string(r) for r in missing] == [
        '{APIGroups:[""], Resources:["pods/resize"], Verbs:["patch"]}']


def test_every_command_kind_the_decisions_produce_is_executed() -> None:
    calls, failures = executed()
    assert failures == ()  # e.g. a kind the executor's resource map does not know
    verbs = {call.attributes()[0] for call in calls}
    assert {"create", "delete", "patch", "get", "update"} <= verbs


def test_executor_rbac_allows_every_call_the_executor_makes() -> None:
    calls, _ = executed()
    denied = sorted({call.attributes()[:4] for call in calls if not _allowed(EXECUTOR, call)})
    assert denied == []


def test_watcher_rbac_allows_every_list_and_watch_and_grants_no_writes() -> None:
    calls = asyncio.run(watcher_calls())
    assert {call.attributes()[0] for call in calls} == {"list", "watch"}
    denied = sorted({call.attributes()[:4] for call in calls if not _allowed(WATCHER, call)})
    assert denied == []
