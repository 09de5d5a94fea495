"""Go's formatting of values in API error messages (%q, %#v), so messages read as upstream's."""

from __future__ import annotations

import json
import uuid
from typing import Any


def quote(text: str) -> str:
    """strconv.Quote for the ASCII texts API messages carry."""
    return json.dumps(text, ensure_ascii=False)


def q_slice(items: list[str] | tuple[str, ...]) -> str:
    """%q of a []string: ["a" "b"]."""
    return "[" + " ".join(quote(i) for i in items) + "]"


def string_slice(items: list[Any]) -> str:
    """%#v of a []string: []string{"a", "b"}."""
    return "[]string{" + ", ".join(quote(str(i)) for i in items) + "}"


def bad_value(value: Any) -> str:
    """field.Error's rendering of a bad value: strings quoted, numbers/bools plain, nil as null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, list) and all(isinstance(i, str) for i in value):
        return string_slice(value)
    return quote(json.dumps(value))


def _pointer() -> str:
    return "(*bool)(0x" + uuid.uuid4().hex[:12] + ")"


def owner_references(refs: list[dict[str, Any]]) -> str:
    """%#v of []v1.OwnerReference (pointers print as addresses, nil as nil)."""
    def one(r: dict[str, Any]) -> str:
        ptr = {k: (_pointer() if r.get(k) is not None else "(*bool)(nil)") for k in ("controller", "blockOwnerDeletion")}
        return (f"v1.OwnerReference{{APIVersion:{quote(str(r.get('apiVersion', '')))}, "
                f"Kind:{quote(str(r.get('kind', '')))}, Name:{quote(str(r.get('name', '')))}, "
                f"UID:{quote(str(r.get('uid', '')))}, Controller:{ptr['controller']}, "
                f"BlockOwnerDeletion:{ptr['blockOwnerDeletion']}}}")
    return "[]v1.OwnerReference{" + ", ".join(one(r) for r in refs) + "}"
