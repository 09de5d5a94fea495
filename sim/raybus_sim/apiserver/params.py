"""Query-parameter parsing with upstream-style 400s instead of 500s on garbage."""

from __future__ import annotations

from typing import Any

from . import errors


def int_param(q: Any, name: str) -> int:
    raw = q.get(name)
    if raw in (None, ""):
        return 0
    try:
        return int(raw)
    except ValueError:
        raise errors.bad_request(f'invalid value for {name}: "{raw}": strconv.ParseInt: parsing "{raw}": '
                                 f'invalid syntax') from None
