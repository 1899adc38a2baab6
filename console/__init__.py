"""The console app: cross-app pages and API (see apps.py)."""
