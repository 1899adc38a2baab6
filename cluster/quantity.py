"""Kubernetes resource quantities in the canonical form the API server stores.

The API server rewrites quantities it decodes ("1024Gi" becomes "1Ti", "2.5" becomes
"2500m", 64 becomes "64"). Rendering the canonical form up front means a desired object
equals the live one, so a second reconcile finds nothing to patch.
"""

from decimal import Decimal

_DECIMAL_SUFFIXES = [("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3), ("", 0),
                     ("m", -3), ("u", -6), ("n", -9)]
_BINARY_SUFFIXES = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)]
_PARSE = {suffix: Decimal(10) ** exp for suffix, exp in _DECIMAL_SUFFIXES} | {
    suffix: Decimal(2) ** exp for suffix, exp in _BINARY_SUFFIXES
}


def parse(value) -> tuple[Decimal, bool]:
    """A quantity as (amount, written with a binary suffix)."""
    text = str(value).strip()
    for suffix in sorted(_PARSE, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * _PARSE[suffix], suffix.endswith("i")
    return Decimal(text), False


def canonical(value) -> str:
    """The API server's spelling of ``value`` (an int, Decimal or quantity string)."""
    amount, binary = parse(value)
    if amount == 0:
        return "0"
    if binary and amount == amount.to_integral_value():
        for suffix, exp in _BINARY_SUFFIXES:
            unit = Decimal(2) ** exp
            if amount >= unit and amount % unit == 0:
                return f"{int(amount / unit)}{suffix}"
        if amount < 1024:
            return str(int(amount))
    for suffix, exp in _DECIMAL_SUFFIXES:
        mantissa = amount / (Decimal(10) ** exp)
        if mantissa == mantissa.to_integral_value():
            return f"{int(mantissa)}{suffix}"
    # Finer than a nano-unit: the server rounds up to whole nano-units.
    return f"{int((amount * Decimal(10) ** 9).to_integral_value(rounding='ROUND_CEILING'))}n"


def gib(amount: int) -> str:
    return canonical(f"{amount}Gi")
