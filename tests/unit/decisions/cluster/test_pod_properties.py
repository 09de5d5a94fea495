"""Property tests: invariants of every Pod we build, whatever the user's template says."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster.kuberay_names import check_label, check_name
from raybus.decisions.cluster.pod_template import build_head_pod, build_worker_pod
from raybus.decisions.cluster.settings import OperatorSettings
from tests.unit.decisions.cluster.test_pod_fixtures import INSTANCE, first_group

PROTECTED = ("ray.io/node-type", "ray.io/group", "ray.io/cluster")
label_keys = st.one_of(
    st.sampled_from(
        [*PROTECTED, "ray.io/is-ray-node", "ray.io/identifier", "app.kubernetes.io/name", "team"]
    ),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz./-", min_size=1, max_size=20),
)
label_maps = st.dictionaries(label_keys, st.text(alphabet="abcxyz0123-", max_size=10), max_size=6)
param_maps = st.dictionaries(
    st.sampled_from(
        ["num-cpus", "memory", "port", "block", "dashboard-host", "object-store-memory", "temp-dir"]
    ),
    st.sampled_from(["1", "true", "false", "0.0.0.0", "/tmp/x"]),
    max_size=4,
)
group_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=30)
user_containers = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["side-a", "side-b"]), "image": st.just("busybox")}),
    max_size=2,
)


@st.composite
def clusters(draw: st.DrawFn) -> RayCluster:
    data: dict[str, Any] = copy.deepcopy(INSTANCE)
    spec = data["spec"]
    spec["enableInTreeAutoscaling"] = draw(st.booleans())
    if draw(st.booleans()):
        spec["autoscalerOptions"] = {"version": draw(st.sampled_from(["v1", "v2"]))}
    if draw(st.booleans()):
        spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379", "redisPassword": {"value": "pw"}}
    if draw(st.booleans()):
        spec["authOptions"] = {"mode": "token"}
    spec["rayVersion"] = draw(st.sampled_from(["2.9.0", "2.52.1", "2.53.0", "nightly", ""]))
    head_group = spec["headGroupSpec"]
    head_group["template"]["metadata"]["labels"] = draw(label_maps)
    head_group["labels"] = draw(st.one_of(st.none(), label_maps))
    head_group["rayStartParams"] = draw(param_maps)
    head_group["template"]["spec"]["containers"] += draw(user_containers)
    group = spec["workerGroupSpecs"][0]
    group["groupName"] = draw(group_names)
    group["numOfHosts"] = draw(st.integers(min_value=0, max_value=4))
    group["template"]["metadata"]["labels"] = draw(label_maps)
    group["rayStartParams"] = draw(param_maps)
    group["template"]["spec"]["containers"] += draw(user_containers)
    data["metadata"]["name"] = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=60))
    if draw(st.booleans()):
        data["metadata"]["labels"] = {"ray.io/originated-from-crd": "RayService"}
    return RayCluster.from_dict(data)


def _pods(rc: RayCluster) -> list[tuple[str, str, dict[str, Any]]]:
    s = OperatorSettings()
    group = first_group(rc)
    return [
        ("head", "headgroup", build_head_pod(rc, settings=s, name="h")),
        ("worker", group.group_name, build_worker_pod(rc, group, settings=s, name="w", replica_index=1)),
    ]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_system_labels_win_and_ray_container_is_first(rc: RayCluster) -> None:
    before = rc.model_dump()
    for node_type, group_name, pod in _pods(rc):
        labels = pod["metadata"]["labels"]
        assert labels["ray.io/node-type"] == node_type
        assert labels["ray.io/group"] == group_name
        assert labels["ray.io/cluster"] == rc.name
        containers = pod["spec"]["containers"]
        assert containers[0]["name"] in ("ray-head", "ray-worker")
        assert sum(c["name"] in ("ray-head", "ray-worker") for c in containers) == 1
        autoscalers = [c for c in containers if c["name"] == "autoscaler"]
        assert len(autoscalers) == (1 if node_type == "head" and rc.spec.enable_in_tree_autoscaling else 0)
        refs = [r for r in pod["metadata"]["ownerReferences"] if r.get("controller")]
        assert len(refs) == 1 and refs[0]["kind"] == "RayCluster" and refs[0]["uid"] == "uid-1"
        assert refs[0]["blockOwnerDeletion"] is True
        gen = next(e["value"] for e in containers[0]["env"] if e["name"] == "KUBERAY_GEN_RAY_START_CMD")
        assert gen.count(" --block ") == 1
        flags = [part.split("=", 1)[0] for part in gen.split() if part.startswith("--") and part != "--head"]
        assert flags == sorted(flags)
        mounts = [m["mountPath"] for m in containers[0].get("volumeMounts", [])]
        assert len(mounts) == len(set(mounts))
        volumes = [v["name"] for v in pod["spec"].get("volumes", [])]
        assert len(volumes) == len(set(volumes))
    assert rc.model_dump() == before  # builders are pure


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_building_twice_is_identical(rc: RayCluster) -> None:
    assert _pods(rc) == _pods(rc)


@given(st.text(min_size=1, max_size=120))
def test_check_name_and_label_bounds(name: str) -> None:
    clipped = check_name(name)
    assert len(clipped) == min(len(name), 50)
    assert not clipped[0].isdigit() or not clipped[0].isascii()
    assert clipped[1:] == name[-min(len(name), 50) :][1:]
    assert len(check_label(name)) == min(len(name), 63)
