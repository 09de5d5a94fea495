"""resource.Quantity canonicalization, as built-in objects come back from a real API server.

`cpu: 1` -> "1", `0.5` -> "500m", "1000m" -> "1", "2048Mi" -> "2Gi", "1536Mi" stays, "0.5Gi" -> "512Mi",
"15000" -> "15k", "1e3" stays an exponent form. (CRs are not canonicalized: their fields are not Quantity.)
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

_BIN = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DEC = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DEC_SUFFIX = {v: k for k, v in _DEC.items()}
_BIN_SUFFIX = {v: k for k, v in _BIN.items()}
_RE = re.compile(r"^([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE])?$")


def canonical(value: Any) -> Any:
    """Canonical string for a quantity; anything unparseable is returned unchanged (validation is not ours)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return value
    return _canonical(type(value).__name__, value)


@lru_cache(maxsize=4096)  # the same few quantities repeat across thousands of pods; Fraction math is slow
def _canonical(_kind: str, value: Any) -> Any:  # _kind keeps 1 and "1" (and 1.0) apart in the cache
    m = _RE.match(str(value).strip())
    if not m:
        return value
    try:
        number = Fraction(m.group(1))
    except (ValueError, ZeroDivisionError):
        return value
    suffix = m.group(2) or ""
    if suffix in _BIN:
        fmt, amount = "bin", number * (1024 ** _BIN[suffix])
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:  # a lone "E" is exa
        fmt, amount = "exp", number * Fraction(10) ** int(suffix[1:])
    else:
        fmt, amount = "dec", number * Fraction(10) ** _DEC[suffix]
    if fmt == "bin" and (abs(amount) < 1024 or amount.denominator != 1):
        fmt = "dec"  # small or fractional binary amounts print as decimal SI, like apimachinery
    if amount == 0:
        return "0"
    if fmt == "bin":
        exp = 0
        while exp < 6 and amount % (1024 ** (exp + 1)) == 0:
            exp += 1
        return f"{int(amount / 1024 ** exp)}{_BIN_SUFFIX[exp] if exp else ''}"
    # largest power-of-1000 exponent (>= -9) that keeps the mantissa an integer; round up below nano
    exp = -9
    if (amount * 10 ** 9).denominator != 1:
        amount = Fraction(-((-amount * 10 ** 9).numerator // (amount * 10 ** 9).denominator)) / 10 ** 9
    while exp < 18 and (amount / Fraction(10) ** (exp + 3)).denominator == 1:
        exp += 3
    mantissa = int(amount / Fraction(10) ** exp)
    if fmt == "exp":
        return f"{mantissa}e{exp}" if exp else str(mantissa)
    return f"{mantissa}{_DEC_SUFFIX[exp]}"


def canonical_map(resources: Any) -> Any:
    if not isinstance(resources, dict):
        return resources
    return {k: canonical(v) for k, v in resources.items()}


# resource.ParseQuantity's errors (what the JSON decoder reports for a bad quantity in a built-in object).
_SPLIT = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT = f"quantities must match the regular expression '{SPLIT_RE}'"
_NUMERIC = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$")
_SUFFIX = re.compile(r"^(|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)$")


def parse_error(value: Any) -> str | None:
    """None when value parses as a resource.Quantity, else ParseQuantity's error text."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return ERR_FORMAT
    text = str(value).strip() if not isinstance(value, str) else value
    m = _SPLIT.match(text)
    if not m:
        return ERR_FORMAT
    if not _NUMERIC.match(m.group(1)):
        return "unable to parse numeric part of quantity"
    if not _SUFFIX.match(m.group(2)):
        return "unable to parse quantity's suffix"
    return None


@lru_cache(maxsize=4096)
def _amount(text: str) -> Fraction:
    m = _RE.match(text.strip())
    if not m:
        return Fraction(0)
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    scale: Fraction
    if suffix in _BIN:
        scale = Fraction(1024 ** _BIN[suffix])
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        scale = Fraction(10) ** int(suffix[1:])
    else:
        scale = Fraction(10) ** _DEC[suffix]
    return number * scale


def amount(value: Any) -> Fraction:
    """The quantity's exact value (0 for what does not parse: validation reports that separately)."""
    return _amount(str(value))
