"""Signals the jobs app sends, so apps above it (notifications) can react without this
app importing them. State changes need none: each one saves a ``JobEvent`` (post_save)."""

from django.dispatch import Signal

# Sent by ``Job.observe`` when the cluster's reading changed a job's reason or message
# without moving its state (a waiting job that turns out never to fit: "Can never start").
# Arguments: job.
job_reason_changed = Signal()
