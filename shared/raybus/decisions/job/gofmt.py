"""Go formatting the submitter command must reproduce byte for byte (``strconv.Quote``,
``json.Marshal``, ``fmt.Sprintf("%f", float32)``, sigs.k8s.io/yaml ``YAMLToJSON``)."""

from __future__ import annotations

import json
import re
import struct
from typing import Any

import yaml

_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
            "\\": "\\\\", '"': '\\"'}


def go_quote(s: str) -> str:
    """strconv.Quote: Go escapes, printable runes (unicode.IsPrint ~ str.isprintable) kept as is."""
    out = ['"']
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _go_json_value(value: Any) -> Any:
    """Go's encoding/json prints an integral float64 without a fraction ("1", not "1.0")."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {str(k): _go_json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_json_value(v) for v in value]
    return value


def go_json(value: Any) -> str:
    """json.Marshal: map keys sorted, no spaces, HTML-escaped <, >, & and U+2028/U+2029."""
    text = json.dumps(_go_json_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                     ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    return text


def yaml_to_json(text: str) -> str:
    """sigs.k8s.io/yaml.YAMLToJSON of runtimeEnvYAML (validation already rejected bad YAML)."""
    return go_json(yaml.safe_load(text))


def go_float32_f(value: float) -> str:
    """fmt.Sprintf("%f", float32(x))."""
    f32: float = struct.unpack("f", struct.pack("f", value))[0]
    return f"{f32:.6f}"


_SEMVER = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def ray_version_at_least_2_6(version: str) -> bool:
    """Masterminds semver ``>= 2.6.0`` (lenient "2.52"; a pre-release never satisfies it).
    Raises ValueError when the version does not parse."""
    m = _SEMVER.match(version.strip())
    if m is None:
        raise ValueError(f"Invalid Semantic Version: {version}")
    if m.group(4):
        return False
    parts = tuple(int(g) if g else 0 for g in m.group(1, 2, 3))
    return parts >= (2, 6, 0)
