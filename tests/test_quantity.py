"""Quantities are rendered the way the API server stores them, so re-applies are no-ops."""

import pytest

from cluster.quantity import canonical, gib


@pytest.mark.parametrize("given, stored", [
    ("1024Gi", "1Ti"), ("512Gi", "512Gi"), ("1536Mi", "1536Mi"), ("2048Gi", "2Ti"),
    (64, "64"), ("64", "64"), ("2.5", "2500m"), ("0.1", "100m"), ("1000", "1k"), ("100m", "100m"),
    ("1500m", "1500m"), ("2000m", "2"), (0, "0"), ("512", "512"),
])
def test_canonical_matches_the_api_server(given, stored):
    assert canonical(given) == stored


def test_gib_helper():
    assert (gib(16), gib(1024), gib(3072)) == ("16Gi", "1Ti", "3Ti")
