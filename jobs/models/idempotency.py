"""Idempotent submission: one ``Idempotency-Key`` creates at most one job.

A CI pipeline that retries a submit after a timeout must not start the job twice. The key
is held by the API token that sent it (or, in a browser session, by its user); the unique
constraints make concurrent duplicates collide in the database, so exactly one of them
creates the job and the others replay it.
"""

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import Q

from tenants.tokens import ApiToken


class KeyConflict(Exception):
    """The key was used for another request, or its first request has not finished."""


class IdempotencyKeyQuerySet(models.QuerySet):
    def claim(self, *, user, token, key: str, digest: str) -> "IdempotencyKey | None":
        """The new record for `key`, or None when it is already held (by this holder)."""
        try:
            # Concurrent duplicates wait here on the unique index until the first one
            # commits, then fail: exactly one of them goes on to create the job.
            with transaction.atomic():
                return self.create(user=user, token=token, key=key, request_digest=digest)
        except IntegrityError:
            return None

    def replayed_job_id(self, *, user, token, key: str, digest: str) -> int:
        """The job an earlier request with `key` created; KeyConflict when it cannot be replayed."""
        holder = {"token": token} if token else {"user": user, "token": None}
        record = self.filter(key=key, **holder).first()
        if record is None or record.job_id is None:  # the job it named was deleted in between
            raise KeyConflict(f"The Idempotency-Key {key!r} is in use; retry.")
        if record.request_digest != digest:
            raise KeyConflict(f"The Idempotency-Key {key!r} was already used for a different request.")
        return record.job_id


class IdempotencyKey(models.Model):
    """One ``Idempotency-Key`` of a job submission, held by a token (or, in a browser
    session, by its user): the unique constraints make concurrent duplicates collide in the
    database, so exactly one of them creates the job."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    token = models.ForeignKey(ApiToken, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    key = models.CharField(max_length=255)
    request_digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical request body.")
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = IdempotencyKeyQuerySet.as_manager()

    class Meta:
        db_table = "tenants_idempotencykey"  # created there; moved here with its table
        constraints = [
            models.UniqueConstraint(
                fields=["token", "key"], condition=Q(token__isnull=False),
                name="idempotency_key_unique_per_token",
                violation_error_message="This Idempotency-Key was already used with this token.",
            ),
            models.UniqueConstraint(
                fields=["user", "key"], condition=Q(token__isnull=True),
                name="idempotency_key_unique_per_session_user",
                violation_error_message="This Idempotency-Key was already used.",
            ),
        ]

    def __str__(self) -> str:
        return self.key
