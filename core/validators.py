"""Django validators for Kubernetes-shaped fields, shared by every app's models."""

import re

import jsonschema
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.deconstruct import deconstructible

from cluster.names import is_dns1035_label, is_dns1123_label, is_label_value, is_qualified_name

# Patterns are matched whole (fullmatch): with re.match and "$", "name\n" would pass.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The largest value of a Kubernetes int32 field (replicas, ports, seconds) and of a
# PostgreSQL integer column.
INT32_MAX = 2**31 - 1


def between(low, high) -> list:
    """Validators keeping a number in [low, high]. Stated on the field itself so the bound
    is the same on every database: SQLite would otherwise take any 64-bit integer, and the
    column type of PostgreSQL is no rule a person can read."""
    return [MinValueValidator(low), MaxValueValidator(high)]


def validate_dns1123_label(value: str) -> None:
    if not is_dns1123_label(value):
        raise ValidationError(
            "Use at most 63 lowercase letters, digits and '-', starting and ending with a "
            "letter or digit (for example 'vision-team').",
            code="dns1123",
        )


def validate_dns1035_label(value: str) -> None:
    """A name that becomes (part of) a Service name: DNS-1035, so it starts with a letter.
    Its length is the field's own (a job name's is 40), said by its max-length error."""
    if not is_dns1035_label(value):
        raise ValidationError(
            "Use lowercase letters, digits and '-', starting with a letter and "
            "ending with a letter or digit (for example 'resnet50-ddp').",
            code="dns1035",
        )


def validate_resource_name(value: str) -> None:
    if "/" not in value or not is_qualified_name(value):
        raise ValidationError(
            "Use an extended resource name with a domain, such as 'nvidia.com/gpu' or "
            "'nvidia.com/mig-1g.10gb'.",
            code="resource_name",
        )


def validate_image(value: str) -> None:
    if not value or any(ch.isspace() for ch in value):
        raise ValidationError("An image reference cannot contain spaces.", code="image")


def validate_env(value) -> None:
    if not isinstance(value, dict):
        raise ValidationError("Environment must be a mapping of NAME to value.", code="env")
    for name, val in value.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise ValidationError(
                f"'{name}' is not a valid variable name: use letters, digits and '_', not "
                "starting with a digit.",
                code="env_name",
            )
        if not isinstance(val, str):
            raise ValidationError(f"The value of {name} must be text.", code="env_value")


def validate_string_list(value) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError("Must be a list of text items.", code="string_list")


def _shown(name: str) -> str:
    return name if len(name) <= 40 else f"{name[:40]}…"


@deconstructible
class TextBounds:
    """Bounds on the free text of a list (a command, its arguments) or a mapping (the
    environment): how many items, how many characters each item has (each name and each
    value of a mapping), how many UTF-8 bytes all of it takes. The shape itself (a list of
    text, a mapping of text) is another validator's; anything else is left to it."""

    def __init__(self, items: int, item_chars: int, total_bytes: int):
        self.items, self.item_chars, self.total_bytes = items, item_chars, total_bytes

    def __call__(self, value) -> None:
        if isinstance(value, dict):
            noun, texts = "variables", [text for pair in value.items() for text in pair]
        elif isinstance(value, list):
            noun, texts = "items", list(value)
        else:
            return
        if len(value) > self.items:
            raise ValidationError(f"At most {self.items} {noun}; this has {len(value):,}.", code="too_many")
        if isinstance(value, dict):
            for name, text in value.items():
                if isinstance(name, str) and len(name) > self.item_chars:
                    raise ValidationError(f"A variable name is at most {self.item_chars} characters; "
                                          f"{_shown(name)} has {len(name):,}.", code="item_too_long")
                if isinstance(text, str) and len(text) > self.item_chars:
                    raise ValidationError(f"The value of {_shown(str(name))} is {len(text):,} characters long; "
                                          f"at most {self.item_chars}.", code="item_too_long")
        else:
            for number, text in enumerate(value, start=1):
                if isinstance(text, str) and len(text) > self.item_chars:
                    raise ValidationError(f"Item {number} is {len(text):,} characters long; at most "
                                          f"{self.item_chars}.", code="item_too_long")
        size = sum(len(text.encode("utf-8", "surrogatepass")) for text in texts if isinstance(text, str))
        if size > self.total_bytes:
            raise ValidationError(f"{size:,} bytes in all; at most {self.total_bytes:,} "
                                  f"({self.total_bytes // 1024} KiB).", code="too_large")

    def __eq__(self, other) -> bool:
        return isinstance(other, TextBounds) and (self.items, self.item_chars, self.total_bytes) == (
            other.items, other.item_chars, other.total_bytes)


def validate_node_labels(value) -> None:
    if not isinstance(value, dict):
        raise ValidationError("Node labels must be a mapping of key to value.", code="labels")
    for key, val in value.items():
        if not is_qualified_name(key):
            raise ValidationError(f"'{key}' is not a valid label key.", code="label_key")
        if not isinstance(val, str) or not is_label_value(val):
            raise ValidationError(
                f"The value of label '{key}' must be at most 63 letters, digits, '-', '_' or "
                "'.', starting and ending with a letter or digit.",
                code="label_value",
            )


_EFFECT = {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}
TOLERATIONS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "key": {"type": "string"},
            "operator": {"enum": ["Equal", "Exists"]},
            "value": {"type": "string"},
            "effect": _EFFECT,
            "tolerationSeconds": {"type": "integer", "minimum": 0},
        },
    },
}
TAINTS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["key", "effect"],
        "properties": {
            "key": {"type": "string", "minLength": 1},
            "value": {"type": "string"},
            "effect": _EFFECT,
        },
    },
}


@deconstructible
class JsonSchemaValidator:
    """Validates a JSON field against a schema, reporting the first problem in plain words."""

    def __init__(self, schema: dict, what: str):
        self.schema = schema
        self.what = what

    def __call__(self, value) -> None:
        try:
            jsonschema.validate(value, self.schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path)
            at = f" at {where}" if where else ""
            raise ValidationError(f"Invalid {self.what}{at}: {exc.message}.", code="schema") from None

    def __eq__(self, other) -> bool:
        return isinstance(other, JsonSchemaValidator) and (self.schema, self.what) == (other.schema, other.what)


validate_tolerations = JsonSchemaValidator(TOLERATIONS_SCHEMA, "tolerations")
validate_taints = JsonSchemaValidator(TAINTS_SCHEMA, "node taints")
