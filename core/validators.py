"""Django validators for Kubernetes-shaped fields, shared by every app's models."""

import re
import unicodedata

import jsonschema
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.deconstruct import deconstructible

from cluster.names import (
    DNS1035_LABEL,
    DNS1123_LABEL,
    is_dns1035_label,
    is_dns1123_label,
    is_label_value,
    is_qualified_name,
)

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


def matches(regex: re.Pattern):
    """Says on a validator the pattern it holds a value to, matched whole, so the API schema
    states it (``core.api_schema``) from the rule itself, never a copy of it."""

    def mark(validator):
        validator.regex = regex
        return validator

    return mark


@matches(DNS1123_LABEL)
def validate_dns1123_label(value: str) -> None:
    if not is_dns1123_label(value):
        raise ValidationError(
            "Use at most 63 lowercase letters, digits and '-', starting and ending with a "
            "letter or digit (for example 'vision-team').",
            code="dns1123",
        )


@matches(DNS1035_LABEL)
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
            self._check_variables(value)
        else:
            self._check_items(value)
        size = sum(len(text.encode("utf-8", "surrogatepass")) for text in texts if isinstance(text, str))
        if size > self.total_bytes:
            raise ValidationError(f"{size:,} bytes in all; at most {self.total_bytes:,} "
                                  f"({self.total_bytes // 1024} KiB).", code="too_large")

    def _check_variables(self, value: dict) -> None:
        for name, text in value.items():
            if isinstance(name, str) and len(name) > self.item_chars:
                raise ValidationError(f"A variable name is at most {self.item_chars} characters; "
                                      f"{_shown(name)} has {len(name):,}.", code="item_too_long")
            if isinstance(text, str) and len(text) > self.item_chars:
                raise ValidationError(f"The value of {_shown(str(name))} is {len(text):,} characters long; "
                                      f"at most {self.item_chars}.", code="item_too_long")

    def _check_items(self, value: list) -> None:
        for number, text in enumerate(value, start=1):
            if isinstance(text, str) and len(text) > self.item_chars:
                raise ValidationError(f"Item {number} is {len(text):,} characters long; at most "
                                      f"{self.item_chars}.", code="item_too_long")

    def __eq__(self, other) -> bool:
        return isinstance(other, TextBounds) and (self.items, self.item_chars, self.total_bytes) == (
            other.items, other.item_chars, other.total_bytes)


# --- text that reaches the cluster (issue 29, finding 13) -----------------------------------------
# An image reference as the container runtimes parse it: distribution/reference's grammar
# (reference/regexp.go), ASCII only. reference := name [":" tag] ["@" digest];
# name := [domain "/"] path-component ["/" path-component]*.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = r"\w[\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
PATH_COMPONENT = re.compile(_PATH_COMPONENT, re.ASCII)
IMAGE_NAME_MAX_LENGTH = 255  # the grammar's NameTotalLengthMax
# An absolute URL path with an optional query (RFC 3986: pchar, "/" and "?"), as an HTTP
# probe sends it: nothing a request line would split on (no space, CR or LF), no fragment.
_PCHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
URL_PATH = re.compile(rf"/(?:{_PCHAR}|/)*(?:\?(?:{_PCHAR}|[/?])*)?", re.ASCII)
# Free text may hold any printable character, line breaks and tabs included, but none that
# changes what a reader sees without being seen: control characters (NUL included) and the
# Unicode format characters (category Cf: the bidirectional embeddings, overrides and
# isolates of "Trojan Source", zero-width spaces, the BOM, invisible operators...), except
# the zero-width non-joiner and joiner, which Persian, Indic scripts and emoji need.
TEXT_WHITESPACE = frozenset("\t\n\r")
CONTROL_NAMES = {"\x00": "NULL", "\t": "CHARACTER TABULATION", "\n": "LINE FEED", "\r": "CARRIAGE RETURN",
                 "\x1b": "ESCAPE", "\x7f": "DELETE"}
JOINERS = frozenset("\u200c\u200d")


def hidden_character(text: str) -> tuple[int, str] | None:
    """The first character of ``text`` that a reader would not see (1-based position)."""
    for position, char in enumerate(text, start=1):
        if char.isascii() and (char.isprintable() or char in TEXT_WHITESPACE):
            continue
        if unicodedata.category(char) in ("Cc", "Cf", "Cs") and char not in TEXT_WHITESPACE | JOINERS:
            return position, char
    return None


def describe(char: str) -> str:
    """U+202E (RIGHT-TO-LEFT OVERRIDE)."""
    name = unicodedata.name(char, "") or CONTROL_NAMES.get(char, "a control character")
    return f"U+{ord(char):04X} ({name})"


def validate_image(value: str) -> None:
    if not value or any(ch.isspace() for ch in value):
        raise ValidationError("An image reference cannot contain spaces or line breaks.", code="image")
    if not value.isascii() or not value.isprintable():
        char = next(ch for ch in value if not (ch.isascii() and ch.isprintable()))
        raise ValidationError(f"An image reference is plain ASCII: {describe(char)} is not allowed.", code="image")
    match = IMAGE_REFERENCE.fullmatch(value)
    first, _, rest = match["name"].partition("/") if match else ("", "", "")
    # As the runtimes read it, a first part is a registry only with a '.' or ':' in it, or as
    # localhost; else it is part of the repository, lowercase like the rest.
    if match and rest and not ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        match = match if PATH_COMPONENT.fullmatch(first) else None
    if match is None:
        raise ValidationError(
            "Not an image reference: use [registry/]repository[:tag][@digest], the repository in lowercase "
            "letters, digits and '.', '_' or '-' between them (for example ghcr.io/team/train:1.0).", code="image")
    if len(match["name"]) > IMAGE_NAME_MAX_LENGTH:
        raise ValidationError(f"An image's name (before its tag and digest) is at most {IMAGE_NAME_MAX_LENGTH} "
                              "characters.", code="image")


def validate_url_path(value: str) -> None:
    """An HTTP path the cluster requests (a readiness probe's)."""
    if not value.startswith("/"):
        raise ValidationError("A path starts with '/', for example /healthz.", code="url_path")
    odd = next((ch for ch in value if not (ch.isascii() and ch.isprintable()) or ch == " "), None)
    if odd is not None:
        raise ValidationError(f"A path has no spaces, line breaks or other characters outside ASCII: "
                              f"{describe(odd) if odd != ' ' else 'a space'} is not allowed; percent-encode it "
                              "(a space is %20).", code="url_path")
    if not URL_PATH.fullmatch(value):
        raise ValidationError("Use the characters of a URL path (letters, digits, / and -._~!$&'()*+,;=:@, "
                              "%XX for any other), then ?query if need be; no #fragment.", code="url_path")


def validate_visible_text(value) -> None:
    """No hidden characters in a list of text (a command, its arguments) or the values of a
    mapping (the environment); see ``hidden_character``. Other shapes are another validator's."""
    if isinstance(value, dict):
        texts = [(f"The value of {_shown(str(name))}", text) for name, text in value.items()]
    elif isinstance(value, list):
        texts = [(f"Item {number}", text) for number, text in enumerate(value, start=1)]
    else:
        return
    for where, text in texts:
        found = hidden_character(text) if isinstance(text, str) else None
        if found:
            position, char = found
            raise ValidationError(
                f"{where} holds {describe(char)} at character {position}: control and invisible formatting "
                "characters are refused, so what runs reads as it is shown.", code="hidden_character")


def validate_label_key(value: str) -> None:
    if value and not is_qualified_name(value):
        raise ValidationError(f"'{value}' is not a valid label key, e.g. example.com/rack.", code="label_key")


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
