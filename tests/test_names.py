"""Kubernetes naming rules and stable shortening."""

import pytest

from cluster.names import bounded_name, is_dns1123_label, is_label_value, is_qualified_name


@pytest.mark.parametrize("value, ok", [
    ("vision", True), ("a", True), ("a-1", True), ("x" * 63, True),
    ("x" * 64, False), ("-a", False), ("a-", False), ("A", False), ("a_b", False), ("", False), ("é", False),
])
def test_dns1123_labels(value, ok):
    assert is_dns1123_label(value) is ok


@pytest.mark.parametrize("value, ok", [
    ("nvidia.com/gpu", True), ("nvidia.com/mig-1g.10gb", True), ("gpu", True), ("kubernetes.io/metadata.name", True),
    ("nvidia com/gpu", False), ("/gpu", False), ("nvidia.com/", False), ("a/b/c", False),
])
def test_qualified_names(value, ok):
    assert is_qualified_name(value) is ok


@pytest.mark.parametrize("value, ok", [("", True), ("v1.2_3-a", True), ("x" * 64, False), ("-a", False), ("a b", False)])
def test_label_values(value, ok):
    assert is_label_value(value) is ok


def test_short_names_are_joined_unchanged():
    assert bounded_name("team-vision", "h100") == "team-vision-h100"


def test_long_names_are_cut_with_a_stable_hash():
    name = bounded_name("team-" + "x" * 40, "a-very-long-flavor-name-for-testing")
    assert len(name) == 63 and is_dns1123_label(name)
    assert name == bounded_name("team-" + "x" * 40, "a-very-long-flavor-name-for-testing")


def test_two_long_names_with_a_shared_prefix_differ():
    assert bounded_name("p" * 70, "a") != bounded_name("p" * 70, "b")


def test_a_cut_never_ends_in_a_dash():
    name = bounded_name("a" * 53 + "-" + "b" * 20, limit=63)
    assert is_dns1123_label(name)
