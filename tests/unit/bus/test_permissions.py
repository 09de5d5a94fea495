"""The permission table follows the bus contract: who may publish each raybus subject."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raybus.bus import subjects as s
from raybus.bus.permissions import Role, permissions


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` one token, `>` the rest."""
    p, t = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(t) > i
        if i >= len(t) or (token != "*" and token != t[i]):
            return False
    return len(p) == len(t)


def may_publish(role: Role, subject: str) -> bool:
    perms = permissions(role)
    return (any(matches(p, subject) for p in perms.publish)
            and not any(matches(p, subject) for p in perms.deny_publish))


names = st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True)
controllers = st.sampled_from(list(s.Controller))


@settings(max_examples=40)
@given(controllers, names, names)
def test_only_a_controllers_own_reconciler_may_command_or_write_status(c: s.Controller, ns: str, name: str) -> None:
    own = {s.Controller.CLUSTER: Role.CLUSTER_RECONCILER, s.Controller.JOB: Role.JOB_RECONCILER,
           s.Controller.SERVICE: Role.SERVICE_RECONCILER}[c]
    for subject in (s.command_subject(c, ns, name), s.status_subject(c, ns, name)):
        allowed = {r for r in Role if may_publish(r, subject)}
        assert allowed == {own, Role.BUS_ADMIN}, subject


@settings(max_examples=40)
@given(controllers, names, names)
def test_only_the_executor_reports_outcomes(c: s.Controller, ns: str, name: str) -> None:
    allowed = {r for r in Role if may_publish(r, s.outcome_subject(c, ns, name))}
    assert allowed == {Role.COMMAND_EXECUTOR, Role.BUS_ADMIN}


@settings(max_examples=40)
@given(names, names)
def test_only_the_watcher_publishes_objects(ns: str, name: str) -> None:
    allowed = {r for r in Role if may_publish(r, s.object_subject("pod", ns, name))}
    assert allowed == {Role.WATCHER, Role.BUS_ADMIN}


@settings(max_examples=40)
@given(names, names)
def test_dashboard_observations_come_from_the_poller_only(ns: str, name: str) -> None:
    allowed = {r for r in Role if may_publish(r, s.dashboard_subject(ns, name))}
    assert allowed == {Role.DASHBOARD_POLLER, Role.BUS_ADMIN}


@pytest.mark.parametrize("role", [r for r in Role if r is not Role.BUS_ADMIN])
def test_no_service_may_manage_streams_or_buckets(role: Role) -> None:
    for stream in (s.STREAM_COMMANDS, s.STREAM_OBJECTS, f"KV_{s.KV_BATCHES}"):
        for op in ("CREATE", "UPDATE", "DELETE", "PURGE"):
            assert not may_publish(role, f"$JS.API.STREAM.{op}.{stream}"), (role, op, stream)


def test_the_ledger_is_written_by_executor_poller_and_reconcilers_only() -> None:
    key = f"$KV.{s.KV_BATCHES}.abc123"
    allowed = {r for r in Role if may_publish(r, key)}
    assert allowed == {Role.COMMAND_EXECUTOR, Role.DASHBOARD_POLLER, Role.CLUSTER_RECONCILER,
                       Role.JOB_RECONCILER, Role.SERVICE_RECONCILER, Role.BUS_ADMIN}


def test_tap_publishes_nothing() -> None:
    assert not any(may_publish(Role.TAP, subj) for subj in (
        s.command_subject("cluster", "a", "b"), s.trigger_subject("job", namespace="a", name="b"),
        "$JS.API.INFO", f"$KV.{s.KV_LEASES}.x"))
