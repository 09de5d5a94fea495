"""rbac/v1 PolicyRule semantics: the authorizer's RuleAllows and the escalation check's Covers
(k8s.io/component-helpers/auth/rbac/validation), plus PolicyRule.CompactString for messages.

Pure functions over plain dicts, so tests can check RBAC coverage without a server.
"""

from __future__ import annotations

from typing import Any

from .gofmt import q_slice

Rule = dict[str, Any]


def _has(values: list[str] | None, want: str) -> bool:
    return bool(values) and ("*" in values or want in values)  # type: ignore[operator]


def resource_matches(rule: Rule, resource: str, subresource: str) -> bool:
    """ResourceMatches: "*", the exact resource[/subresource], or "*/<subresource>"."""
    combined = f"{resource}/{subresource}" if subresource else resource
    for r in rule.get("resources") or []:
        if r == "*" or r == combined or (subresource and r == f"*/{subresource}"):
            return True
    return False


def rule_allows(rule: Rule, verb: str, group: str, resource: str, subresource: str, name: str) -> bool:
    names = rule.get("resourceNames") or []
    return (_has(rule.get("verbs"), verb) and _has(rule.get("apiGroups"), group)
            and resource_matches(rule, resource, subresource) and (not names or name in names))


def breakdown(rule: Rule) -> list[Rule]:
    """BreakdownRule: one rule per (group, resource, verb[, resourceName]) and per (URL, verb)."""
    out: list[Rule] = []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                names = rule.get("resourceNames") or []
                out += [dict(base, resourceNames=[n]) for n in names] if names else [base]
    for url in rule.get("nonResourceURLs") or []:
        for verb in rule.get("verbs") or []:
            out.append({"nonResourceURLs": [url], "verbs": [verb]})
    return out


def _resources_cover(owner: list[str], wanted: list[str]) -> bool:
    if "*" in owner or all(w in owner for w in wanted):
        return True
    for path in wanted:
        if path in owner:
            continue
        if "/" not in path or f"*/{path.split('/', 1)[1]}" not in owner:
            return False
    return True


def _urls_cover(owner: list[str], wanted: list[str]) -> bool:
    for url in wanted:
        if not any(o == "*" or o == url or (o.endswith("*") and url.startswith(o[:-1])) for o in owner):
            return False
    return True


def rule_covers(owner: Rule, sub: Rule) -> bool:
    def every(field: str) -> bool:
        have = owner.get(field) or []
        return "*" in have or all(v in have for v in sub.get(field) or [])
    have_names, want_names = owner.get("resourceNames") or [], sub.get("resourceNames") or []
    names_ok = not have_names or (bool(want_names) and all(n in have_names for n in want_names))
    return (every("verbs") and every("apiGroups") and _resources_cover(owner.get("resources") or [],
                                                                         sub.get("resources") or [])
            and _urls_cover(owner.get("nonResourceURLs") or [], sub.get("nonResourceURLs") or []) and names_ok)


def covers(owner_rules: list[Rule], servant_rules: list[Rule]) -> tuple[bool, list[Rule]]:
    """Covers: whether the owner's rules include every servant rule; the uncovered pieces, compacted."""
    missing = [sub for rule in servant_rules for sub in breakdown(rule)
               if not any(rule_covers(owner, sub) for owner in owner_rules)]
    return not missing, compact(missing)


def compact(rules: list[Rule]) -> list[Rule]:
    """CompactRules: simple rules for one group/resource merged into one rule with all their verbs."""
    merged: dict[tuple[str, str, str], Rule] = {}
    out: list[Rule] = []
    for rule in rules:
        if rule.get("nonResourceURLs") or len(rule.get("apiGroups") or []) != 1 or len(rule.get("resources") or []) != 1:
            out.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], ",".join(rule.get("resourceNames") or []))
        if key in merged:
            merged[key]["verbs"] = merged[key]["verbs"] + list(rule.get("verbs") or [])
        else:
            merged[key] = {k: list(v) for k, v in rule.items()}
    return out + list(merged.values())


def compact_string(rule: Rule) -> str:
    """PolicyRule.CompactString: {APIGroups:[""], Resources:["pods"], Verbs:["get"]}."""
    parts = [f"{label}:{q_slice(rule[field])}" for label, field in (
        ("APIGroups", "apiGroups"), ("Resources", "resources"), ("NonResourceURLs", "nonResourceURLs"),
        ("ResourceNames", "resourceNames"), ("Verbs", "verbs")) if rule.get(field)]
    return "{" + ", ".join(parts) + "}"
