"""A small, exact ``resource.Quantity`` (k8s.io/apimachinery/pkg/api/resource) for status sums.

Only what ``calculateStatus`` needs: parse a quantity, add with Go's format rule (a zero receiver
adopts the addend's format), and print the canonical string (``Quantity.String`` /
``CanonicalizeBytes``): DecimalSI picks the largest 10^3k exponent with an integral mantissa
("1500m", "2k"); BinarySI uses 1024^k suffixes for integral values outside (-1024, 1024) and falls
back to DecimalSI otherwise; precision finer than nano is rounded up, as the Go type does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from enum import StrEnum
from functools import lru_cache


class QuantityFormat(StrEnum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"
    UNSET = ""


_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_BY_EXP = {exp: suffix for suffix, exp in _BINARY.items()}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")
_NANO = Decimal("1e-9")


@dataclass(frozen=True)
class Quantity:
    value: Decimal = Decimal(0)
    format: QuantityFormat = QuantityFormat.UNSET

    def add(self, other: Quantity) -> Quantity:
        """Quantity.Add: a zero receiver takes the addend's format."""
        fmt = other.format if self.value == 0 else self.format
        with localcontext() as ctx:
            ctx.prec = 60
            return Quantity(self.value + other.value, fmt)

    def is_zero(self) -> bool:
        return self.value == 0

    def __str__(self) -> str:
        return format_quantity(self)


class QuantityError(ValueError):
    pass


def parse_quantity(raw: str | float) -> Quantity:
    """resource.ParseQuantity (JSON numbers are DecimalSI, as the Go unmarshaller treats them)."""
    if isinstance(raw, bool):
        raise QuantityError(f"invalid quantity {raw!r}")
    if isinstance(raw, int | float):
        return Quantity(Decimal(str(raw)), QuantityFormat.DECIMAL_SI)
    try:
        return _parse_text(raw.strip())
    except QuantityError:
        raise QuantityError(f"invalid quantity {raw!r}") from None


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Quantity:
    # Memoised: every reconcile sums the same few request strings ("1", "2Gi") for every Pod, and
    # Quantity is frozen. An invalid text raises each time (exceptions are not cached).
    match = _RE.match(text)
    if not match:
        raise QuantityError(f"invalid quantity {text!r}")
    number, exponent, suffix = match.groups()
    with localcontext() as ctx:
        ctx.prec = 60
        value = Decimal(number)
        if exponent:
            return Quantity(value.scaleb(int(exponent[1:])), QuantityFormat.DECIMAL_EXPONENT)
        if suffix in _BINARY:
            return Quantity(value * (Decimal(1024) ** _BINARY[suffix]), QuantityFormat.BINARY_SI)
        return Quantity(value.scaleb(_DECIMAL[suffix or ""]), QuantityFormat.DECIMAL_SI)


def _round_up_nano(value: Decimal) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return value.quantize(_NANO, rounding=ROUND_CEILING)


def _mantissa_exponent10(value: Decimal) -> tuple[int, int]:
    """Largest exponent (multiple of 3, in [-9, 18]) such that value / 10^exp is integral."""
    exp = 18
    while exp > -9:
        scaled = value.scaleb(-exp)
        if scaled == scaled.to_integral_value():
            return int(scaled), exp
        exp -= 3
    return int(value.scaleb(9)), -9


def format_quantity(q: Quantity) -> str:
    """Quantity.String (canonical form)."""
    value = _round_up_nano(q.value)
    if value == 0:
        return "0"
    fmt = q.format
    if fmt is QuantityFormat.BINARY_SI:
        if -1024 < value < 1024 or value != value.to_integral_value():
            fmt = QuantityFormat.DECIMAL_SI
        else:
            mantissa, exp = int(value), 0
            while exp < 6 and mantissa % 1024 == 0:
                mantissa //= 1024
                exp += 1
            return f"{mantissa}{_BINARY_BY_EXP.get(exp, '')}"
    mantissa, exp10 = _mantissa_exponent10(value)
    if fmt is QuantityFormat.DECIMAL_EXPONENT:
        return f"{mantissa}e{exp10}" if exp10 else str(mantissa)
    return f"{mantissa}{_DECIMAL_BY_EXP[exp10]}"


def sum_quantities(items: list[Quantity]) -> Quantity:
    total = Quantity()
    for item in items:
        total = total.add(item)
    return total


def scale(q: Quantity, times: int) -> Quantity:
    """``times`` repeated Adds starting from a zero Quantity (how KubeRay multiplies by replicas)."""
    if times <= 0:
        return Quantity()
    return Quantity(q.value * times, q.format)
