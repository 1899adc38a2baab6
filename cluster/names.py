"""Kubernetes naming rules: DNS-1123 labels and stable shortening of long names."""

import hashlib
import re

DNS1123_LABEL_MAX = 63
# Matched whole (fullmatch): re.match with "$" would accept a trailing newline.
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Service names (and so every name a Service is derived from) must start with a letter.
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# A qualified name as used for extended resources and label keys: optional DNS-1123
# subdomain prefix, a slash, and a name part of alphanumerics, '-', '_' and '.'.
_QUALIFIED_NAME = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and bool(DNS1123_LABEL.fullmatch(value))


def is_dns1035_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and bool(DNS1035_LABEL.fullmatch(value))


def is_qualified_name(value: str) -> bool:
    prefix, _, _ = value.rpartition("/")
    return len(prefix) <= 253 and bool(_QUALIFIED_NAME.fullmatch(value))


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.fullmatch(value))


def bounded_name(*parts: str, limit: int = DNS1123_LABEL_MAX) -> str:
    """Join parts with '-' into a DNS-1123 label of at most ``limit`` characters.

    A name that fits is returned as is. A longer one is cut and ends in a hash of the
    whole name, so two long names that share a prefix still differ and the same input
    always yields the same name.
    """
    name = "-".join(part for part in parts if part)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    head = name[: limit - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}"
