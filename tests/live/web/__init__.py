"""Journeys in a real browser on the demo data with the local cluster."""
