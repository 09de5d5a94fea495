"""Mutating accessors for camelCase manifest dicts that tolerate explicit ``null`` fields.

YAML like ``metadata:`` or ``env: null`` parses to ``None``; Go unmarshals both as an empty
value, so builders treat ``None`` and a missing key alike (``dict.setdefault`` would not).
"""

from __future__ import annotations

from typing import Any


def ensure_dict(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` as a dict, created (replacing a ``None``) when missing."""
    value = obj.get(key)
    if not isinstance(value, dict):
        value = {}
        obj[key] = value
    return value


def ensure_list(obj: dict[str, Any], key: str) -> list[Any]:
    """``obj[key]`` as a list, created (replacing a ``None``) when missing."""
    value = obj.get(key)
    if not isinstance(value, list):
        value = []
        obj[key] = value
    return value
