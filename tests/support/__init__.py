"""Plain helpers the tests share (no fixtures: those are in tests/fixtures/)."""
