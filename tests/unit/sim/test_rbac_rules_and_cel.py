"""Pure parts of the local API server that other tests lean on: RBAC rule matching/coverage (upstream's
RuleAllows and Covers), the CEL subset for CRD rules, and the label selector parser's grammar/errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus_sim.apiserver.cel import MISSING, Unsupported, compile_rule, evaluate
from raybus_sim.apiserver.errors import ApiError
from raybus_sim.apiserver.rbac_rules import breakdown, compact_string, covers, rule_allows
from raybus_sim.apiserver.selectors import compile_label_selector

PODS_READ = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}


@pytest.mark.parametrize(("rule", "request_", "allowed"), [
    (PODS_READ, ("get", "", "pods", "", "p"), True),
    (PODS_READ, ("patch", "", "pods", "", "p"), False),
    (PODS_READ, ("get", "", "pods", "status", "p"), False),  # a subresource is its own resource
    ({"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]}, ("patch", "", "pods", "resize", "p"),
     True),
    ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]}, ("get", "", "pods", "status", "p"), True),
    ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, ("delete", "ray.io", "rayclusters", "", "x"), True),
    ({"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"], "resourceNames": ["a"]},
     ("get", "ray.io", "rayclusters", "", "b"), False),
    ({"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["list"], "resourceNames": ["a"]},
     ("list", "ray.io", "rayclusters", "", ""), False),
    (PODS_READ, ("get", "apps", "pods", "", "p"), False),
])
def test_rule_allows(rule: dict[str, Any], request_: tuple[str, str, str, str, str], allowed: bool) -> None:
    assert rule_allows(rule, *request_) is allowed


@pytest.mark.parametrize(("owner", "servant", "missing"), [
    ([PODS_READ], [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], []),
    ([PODS_READ], [{"apiGroups": [""], "resources": ["pods", "pods/resize"], "verbs": ["get", "patch"]}],
     ['{APIGroups:[""], Resources:["pods"], Verbs:["patch"]}',
      '{APIGroups:[""], Resources:["pods/resize"], Verbs:["get" "patch"]}']),
    ([{"apiGroups": [""], "resources": ["*/resize"], "verbs": ["patch"]}],
     [{"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]}], []),
    ([{"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"], "resourceNames": ["a"]}],
     [{"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"]}],
     ['{APIGroups:["ray.io"], Resources:["rayclusters"], Verbs:["get"]}']),
    ([{"nonResourceURLs": ["/healthz*"], "verbs": ["get"]}], [{"nonResourceURLs": ["/healthz/ready"], "verbs": ["get"]}],
     []),
])
def test_covers_reports_the_compacted_missing_rules(owner: list[dict[str, Any]], servant: list[dict[str, Any]],
                                                    missing: list[str]) -> None:
    held, uncovered = covers(owner, servant)
    assert held is (not missing)
    assert sorted(compact_string(r) for r in uncovered) == missing


NAMES = st.sampled_from(["", "ray.io", "apps", "*"])
RULES = st.fixed_dictionaries({
    "apiGroups": st.lists(NAMES, min_size=1, max_size=2),
    "resources": st.lists(st.sampled_from(["pods", "pods/resize", "services", "*", "*/status"]), min_size=1,
                          max_size=3),
    "verbs": st.lists(st.sampled_from(["get", "list", "patch", "*"]), min_size=1, max_size=3)})


@given(st.lists(RULES, min_size=1, max_size=4), st.lists(RULES, min_size=1, max_size=3))
def test_covered_rules_are_allowed_by_the_authorizer(owner: list[dict[str, Any]],
                                                     servant: list[dict[str, Any]]) -> None:
    """Covers and RuleAllows agree: every concrete request a covered rule grants, the owner may make."""
    assert covers(servant, servant)[0]
    if not covers(owner, servant)[0]:
        return
    for sub in (s for rule in servant for s in breakdown(rule)):
        group, resource, verb = sub["apiGroups"][0], sub["resources"][0], sub["verbs"][0]
        if "*" in (group, verb) or resource.startswith("*"):
            continue  # a wildcard is not one concrete request
        name, _, subresource = resource.partition("/")
        assert any(rule_allows(o, verb, group, name, subresource, "n") for o in owner), sub


@pytest.mark.parametrize(("rule", "value", "old", "holds"), [
    ("self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']", "ray.io/kuberay-operator", MISSING, True),
    ("self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']", "other", MISSING, False),
    ("self == oldSelf", "a", "a", True),
    ("self == oldSelf", "a", "b", False),
    ("((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))", {"onSuccess": {}}, MISSING, False),
    ("((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))", {"deletionRules": []}, MISSING,
     True),
    ("!(has(self.jobStatus) && has(self.jobDeploymentStatus))", {"jobStatus": "FAILED"}, MISSING, True),
    ("self.size() <= 3 && self.startsWith('a')", "abc", MISSING, True),
    ("self.x == 1", {}, MISSING, False),  # no such key: the rule fails
])
def test_cel_subset(rule: str, value: Any, old: Any, holds: bool) -> None:
    assert evaluate(rule, value, old) is holds


@pytest.mark.parametrize("rule", ["self.all(x, x > 0)", "other == 1", "self ? 1 : 2"])
def test_cel_outside_the_subset_is_refused_at_compile(rule: str) -> None:
    with pytest.raises(Unsupported):
        compile_rule(rule)


@pytest.mark.parametrize(("selector", "labels", "match"), [
    ("a=b,c in (d,e),!f,g", {"a": "b", "c": "e", "g": ""}, True),
    ("a notin (x)", {}, True),
    ("a!=b", {}, True),
    ("n>3", {"n": "4"}, True),
    ("n<3", {"n": "4"}, False),
    ("a==b", {"a": "c"}, False),
])
def test_label_selectors(selector: str, labels: dict[str, str], match: bool) -> None:
    assert compile_label_selector(selector)({"metadata": {"labels": labels}}) is match


@pytest.mark.parametrize(("selector", "message"), [
    ("env in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("grp=PG!", "found '!', expected: ',' or 'end of string'"),
    ("a,", "found '', expected: identifier after ','"),
    ("a in b", "unable to parse requirement: found 'b' expected: '('"),
])
def test_label_selector_errors_are_upstreams(selector: str, message: str) -> None:
    with pytest.raises(ApiError) as exc:
        compile_label_selector(selector)
    assert (exc.value.code, exc.value.message) == (400, message)
