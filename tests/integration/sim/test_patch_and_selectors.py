"""Pure-function checks of the patch engines, selectors and printer-column JSONPath used by the server."""

from __future__ import annotations

import pytest

from raybus_sim.apiserver.errors import ApiError
from raybus_sim.apiserver.patch import json_patch, merge_patch, strategic_merge
from raybus_sim.apiserver.selectors import compile_label_selector
from raybus_sim.apiserver.table import human_duration, jsonpath

POD = {"metadata": {"name": "p", "finalizers": ["a", "b"], "labels": {"x": "1"}},
       "spec": {"containers": [{"name": "one", "image": "i:1", "env": [{"name": "A", "value": "1"}],
                                "ports": [{"containerPort": 80}]},
                               {"name": "two", "image": "i:1"}],
                "volumes": [{"name": "v", "emptyDir": {}}]}}


def test_strategic_merge_lists_by_key_and_directives() -> None:
    out = strategic_merge(POD, {"spec": {"containers": [
        {"name": "one", "env": [{"name": "B", "value": "2"}], "ports": [{"containerPort": 80, "name": "http"}]},
        {"name": "three", "image": "i:3"}]}})
    # strategicpatch's normalizeElementOrder: the patch's items in patch order, server-only items
    # interleaved in their live order, a new item ahead of them (a real server patched env E1 + E2 to
    # [E2, E1]: ../shared/kube-apiserver/README.md "strategic patch on deployment containers")
    assert [c["name"] for c in out["spec"]["containers"]] == ["one", "three", "two"]
    assert out["spec"]["containers"][0]["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    assert out["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "name": "http"}]
    assert POD["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]  # input untouched

    out = strategic_merge(POD, {"spec": {"containers": [{"name": "two", "$patch": "delete"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["one"]
    out = strategic_merge(POD, {"spec": {"containers": [{"name": "n", "image": "z"}, {"$patch": "replace"}]}})
    assert out["spec"]["containers"] == [{"name": "n", "image": "z"}]
    out = strategic_merge(POD, {"spec": {"$patch": "replace", "containers": []}})
    assert out["spec"] == {"containers": []}
    out = strategic_merge(POD, {"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert out["metadata"]["finalizers"] == ["b", "c"]
    out = strategic_merge(POD, {"spec": {"volumes": [{"name": "v", "configMap": {"name": "cm"},
                                                       "$retainKeys": ["name", "configMap"]}]}})
    assert out["spec"]["volumes"] == [{"name": "v", "configMap": {"name": "cm"}}]
    out = strategic_merge(POD, {"spec": {"$setElementOrder/containers": [{"name": "two"}, {"name": "one"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["two", "one"]
    out = strategic_merge(POD, {"metadata": {"labels": {"x": None, "y": "2"}}})
    assert out["metadata"]["labels"] == {"y": "2"}


def test_merge_and_json_patch() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None}, "l": [3]}) == {"a": {"c": 2}, "l": [3]}
    doc = {"a": [1, 2], "b": {"c": "x"}}
    out = json_patch(doc, [{"op": "add", "path": "/a/-", "value": 3}, {"op": "add", "path": "/a/0", "value": 0},
                           {"op": "move", "from": "/b/c", "path": "/d"}, {"op": "copy", "from": "/d", "path": "/e~1f"},
                           {"op": "test", "path": "/d", "value": "x"}, {"op": "remove", "path": "/b"}])
    assert out == {"a": [0, 1, 2, 3], "d": "x", "e/f": "x"} and doc == {"a": [1, 2], "b": {"c": "x"}}
    with pytest.raises(ApiError) as exc:
        json_patch(doc, [{"op": "test", "path": "/a/0", "value": 9}])
    assert exc.value.code == 422
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "replace", "path": "/missing", "value": 1}])


@pytest.mark.parametrize(("selector", "labels", "want"), [
    ("a=1,b!=2", {"a": "1", "b": "3"}, True),
    ("a=1,b!=2", {"a": "1", "b": "2"}, False),
    ("env in (prod, staging),!legacy", {"env": "prod"}, True),
    ("env in (prod, staging),!legacy", {"env": "prod", "legacy": ""}, False),
    ("env notin (prod)", {}, True),
    ("ray.io/node-type==head", {"ray.io/node-type": "head"}, True),
    ("ray.io/cluster", {"ray.io/cluster": "x"}, True),
    ("", {}, True),
])
def test_label_selector(selector: str, labels: dict, want: bool) -> None:
    assert compile_label_selector(selector)({"metadata": {"labels": labels}}) is want


def test_bad_selector_is_400() -> None:
    with pytest.raises(ApiError) as exc:
        compile_label_selector("a in b")
    assert exc.value.code == 400


def test_jsonpath_and_durations() -> None:
    obj = {"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}],
                      "workers": [{"n": 3}]}}
    assert jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status') == "True"
    assert jsonpath(obj, ".status.workers[0].n") == 3
    assert jsonpath(obj, ".status.missing.x") is None
    assert [human_duration(s) for s in (5, 119, 150, 600, 3 * 3600 + 60, 30 * 3600, 3 * 86400)] == [
        "5s", "119s", "2m30s", "10m", "3h1m", "30h", "3d"]


@pytest.mark.parametrize(("raw", "want"), [
    (1, "1"), (0.5, "500m"), ("1000m", "1"), ("2048Mi", "2Gi"), ("1536Mi", "1536Mi"), ("0.5Gi", "512Mi"),
    ("15000", "15k"), ("1500", "1500"), ("1e3", "1e3"), ("1G", "1G"), ("1000000000", "1G"), ("0.1", "100m"),
    ("1024Ki", "1Mi"), ("512", "512"),
])
def test_quantity_canonical_form(raw: object, want: str) -> None:
    from raybus_sim.apiserver.quantity import canonical

    assert canonical(raw) == want
