"""Serializer pieces that keep what the API accepts exactly what its schema says.

- ``StrictFields``: a body naming a field the serializer does not take (misspelt,
  unsupported or read-only) is a 400 naming each such field, not silently dropped; the
  schema says the same (``additionalProperties: false`` on request bodies, added by
  ``core.api_errors.add_error_responses``).
- ``DecimalInput``: a bounded decimal given as a JSON number or as a decimal string,
  rounded to its places. The schema's string pattern is built from the same bounds and the
  field checks strings against it, so the two cannot disagree (no "" or "-1" that the
  schema allows and the server refuses, or the other way round).
"""

import re
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

UNKNOWN_FIELD = "Unknown field: this request does not take it."
READ_ONLY_FIELD = "Read-only: it cannot be set here."
MAX_DECIMAL_STRING = 32


class StrictFields:
    """Serializer mixin: refuse keys of the body that are not writable fields."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            errors = {str(key): [READ_ONLY_FIELD if key in self.fields else UNKNOWN_FIELD]
                      for key in data if key not in writable}
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


def _digits_at_most(top: str) -> list[str]:
    """Regex alternatives for the integers with as many digits as ``top`` and no more than it."""
    alternatives = []
    for index, digit in enumerate(top):
        lowest = 1 if index == 0 else 0
        if int(digit) > lowest:
            rest = len(top) - index - 1
            alternatives.append(top[:index] + f"[{lowest}-{int(digit) - 1}]" + (rf"\d{{{rest}}}" if rest else ""))
    return [*alternatives, top]


def decimal_pattern(low: Decimal, high: Decimal) -> str:
    """A regex of the decimal strings from ``low`` (0 < low < 1, in tenths) to ``high`` (a whole
    number): no sign, exponent or leading zero, any number of decimal places."""
    if not (0 < low < 1 and low == round(low, 1) and high == int(high) and high >= 1):
        raise ValueError("decimal_pattern takes 0 < low < 1 in tenths and a whole high")
    top, below = int(high), str(int(high) - 1)
    whole = []  # the whole parts 1 .. high - 1, which may have any decimals
    if int(below) >= 1:
        if len(below) > 1:
            whole.append(rf"[1-9]\d{{0,{len(below) - 2}}}")  # fewer digits than high - 1
        whole += _digits_at_most(below)
    parts = [rf"0\.[{int(low * 10)}-9]\d*"]
    if whole:
        parts.append("(?:" + "|".join(whole) + r")(?:\.\d+)?")
    parts.append(rf"{top}(?:\.0+)?")
    return "^(?:" + "|".join(parts) + ")$"


class DecimalInput(serializers.DecimalField):
    """A decimal in [min_value, max_value], as a JSON number or a decimal string, rounded
    half up to ``decimal_places``. Written back as a string, as DRF does."""

    default_error_messages = {"pattern": "A number from {low} to {high}, e.g. 4 or \"0.5\"."}

    def __init__(self, *, min_value: Decimal, max_value: Decimal, decimal_places: int = 2, **kwargs):
        self.pattern = decimal_pattern(Decimal(min_value), Decimal(max_value))
        whole = len(str(int(max_value)))
        super().__init__(max_digits=whole + decimal_places, decimal_places=decimal_places, min_value=Decimal(min_value),
                         max_value=Decimal(max_value), rounding=ROUND_HALF_UP, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (str, int, float)):
            self.fail("pattern", low=self.min_value, high=self.max_value)
        if isinstance(data, str) and (len(data) > MAX_DECIMAL_STRING or not re.fullmatch(self.pattern, data)):
            self.fail("pattern", low=self.min_value, high=self.max_value)
        # The bounds hold for the value as given (rounding cannot take it out of them), and
        # before rounding: a number as large as -1.8e308 has no quantized form (a 500 once).
        exact = Decimal(str(data))
        if not exact.is_finite() or exact < self.min_value or exact > self.max_value:
            self.fail("pattern", low=self.min_value, high=self.max_value)
        return super().to_internal_value(str(data))

    def validate_precision(self, value):
        return super().validate_precision(self.quantize(value))


class DecimalInputSchema(OpenApiSerializerFieldExtension):
    target_class = DecimalInput

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        if direction == "response":
            return {"type": "string", "format": "decimal", "pattern": rf"^\d+\.\d{{{field.decimal_places}}}$"}
        return {"oneOf": [
            {"type": "number", "minimum": float(field.min_value), "maximum": float(field.max_value)},
            {"type": "string", "pattern": field.pattern, "maxLength": MAX_DECIMAL_STRING},
        ]}
