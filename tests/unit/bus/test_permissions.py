"""The permission table follows the bus contract: who may publish each raybus subject."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raybus.bus import subjects as s
from raybus.bus.ledger import command_key
from raybus.bus.permissions import Role, inbox_prefix, permissions
from raybus.bus.publish import dashboard_ledger_key


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


RECONCILERS = {s.Controller.CLUSTER: Role.CLUSTER_RECONCILER, s.Controller.JOB: Role.JOB_RECONCILER,
               s.Controller.SERVICE: Role.SERVICE_RECONCILER}
ids = st.from_regex(r"[a-z0-9][a-z0-9_=-]{0,30}", fullmatch=True)


@settings(max_examples=40, deadline=None)
@given(ids)
def test_the_ledger_is_written_by_its_appliers_only(batch: str) -> None:
    """A record in the command ledger proves a claim only if no one else can write one."""
    assert {r for r in Role if may_publish(r, f"$KV.{s.KV_BATCHES}.{command_key(batch)}")} == {
        Role.COMMAND_EXECUTOR, Role.BUS_ADMIN}
    assert {r for r in Role if may_publish(r, f"$KV.{s.KV_BATCHES}.{dashboard_ledger_key(batch)}")} == {
        Role.DASHBOARD_POLLER, Role.BUS_ADMIN}
    assert not any(may_publish(r, f"$KV.{s.KV_BATCHES}.{batch}") for r in Role if r is not Role.BUS_ADMIN)


@settings(max_examples=40, deadline=None)
@given(controllers, ids)
def test_a_reconciler_revokes_only_its_own_controllers_batches(c: s.Controller, batch: str) -> None:
    for key in (command_key(batch), dashboard_ledger_key(batch)):
        subject = f"$KV.{s.KV_REVOCATIONS}.{c.value}.{key}"
        applier = Role.COMMAND_EXECUTOR if key.startswith("cmd.") else Role.DASHBOARD_POLLER
        assert {r for r in Role if may_publish(r, subject)} == {RECONCILERS[c], applier, Role.BUS_ADMIN}


@settings(max_examples=40, deadline=None)
@given(controllers, st.integers(0, 255), names)
def test_leases_and_memberships_are_written_by_their_owner_only(c: s.Controller, p: int, replica: str) -> None:
    for key in (s.lease_key(c, p), s.member_key(c, replica)):
        assert {r for r in Role if may_publish(r, f"$KV.{s.KV_LEASES}.{key}")} == {RECONCILERS[c], Role.BUS_ADMIN}
    assert {r for r in Role if may_publish(r, f"$KV.{s.KV_LEASES}.{s.POLLER_LEASE_KEY}")} == {
        Role.DASHBOARD_POLLER, Role.BUS_ADMIN}


@settings(max_examples=40, deadline=None)
@given(controllers, st.integers(0, 255))
def test_a_reconciler_pulls_acks_and_creates_only_its_own_trigger_consumers(c: s.Controller, p: int) -> None:
    stream, name = s.trigger_stream(c), s.trigger_consumer_name(c, p)
    for api in (f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{name}",
                f"$JS.ACK.{stream}.{name}.1.2.3.4.5"):
        assert {r for r in Role if may_publish(r, api)} == {RECONCILERS[c], Role.BUS_ADMIN}, api
    # nobody but bus-admin deletes a consumer, nor creates an unnamed one on a work queue
    for stream_ in (stream, s.STREAM_COMMANDS, s.STREAM_STATUS, s.STREAM_DASHBOARD_COMMANDS):
        for api in (f"$JS.API.CONSUMER.DELETE.{stream_}.{name}", f"$JS.API.CONSUMER.CREATE.{stream_}",
                    f"$JS.API.CONSUMER.CREATE.{stream_}.{name}.raybus.>"):
            assert {r for r in Role if may_publish(r, api)} == {Role.BUS_ADMIN}, api


def test_the_appliers_consumers_are_their_own() -> None:
    for stream, name, owner in ((s.STREAM_COMMANDS, s.COMMAND_CONSUMER, Role.COMMAND_EXECUTOR),
                                (s.STREAM_STATUS, s.STATUS_CONSUMER, Role.COMMAND_EXECUTOR),
                                (s.STREAM_DASHBOARD_COMMANDS, s.DASHBOARD_COMMAND_CONSUMER, Role.DASHBOARD_POLLER)):
        assert {r for r in Role if may_publish(r, f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}")} == {
            owner, Role.BUS_ADMIN}


@pytest.mark.parametrize("role", [r for r in Role if r not in (Role.BUS_ADMIN, Role.TAP)])
def test_each_role_reads_only_its_own_inbox(role: Role) -> None:
    """Pull deliveries and API replies go to the requester's inbox: another role's are not readable."""
    assert permissions(role).subscribe == (f"{inbox_prefix(role.value)}.>",)
    for other in Role:
        if other not in (role, Role.BUS_ADMIN):
            sub = f"{inbox_prefix(other.value)}.abc"
            assert not any(matches(p, sub) for p in permissions(role).subscribe), (role, other)
    assert not any(matches(p, "_INBOX.abc.def") for p in permissions(role).subscribe)


def test_tap_publishes_nothing() -> None:
    assert not any(may_publish(Role.TAP, subj) for subj in (
        s.command_subject("cluster", "a", "b"), s.trigger_subject("job", namespace="a", name="b"),
        "$JS.API.INFO", f"$KV.{s.KV_LEASES}.x"))
