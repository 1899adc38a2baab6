"""Notifications: events worth telling people (jobs, quota decisions, grants, members),
by email with preferences and digests, and to team webhooks with a delivery log."""
