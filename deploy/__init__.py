"""The platform's deployment helpers that Python reads (the local stack's profiles)."""
