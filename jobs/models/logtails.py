"""The last lines of a failed container, kept with its job.

A failed job's pods do not stay: the Job controller replaces them, a Volcano gang is
aborted, a finished job's objects are removed after a day. What the researcher needs most
(why it failed) would go with them, so the status watcher keeps the end of each failed
container's log here when it sees the container end (`jobs.watch.watcher`), bounded in lines and
bytes, and the job page shows it once the pods are gone.
"""

from django.db import models
from django.utils import timezone

# Bounds of what is kept: the end of the log is what says why, and a job with many workers
# failing at once keeps a few of them, not hundreds of copies of the same traceback.
MAX_TAIL_LINES = 200
MAX_TAIL_BYTES = 64 * 1024
MAX_TAILS_PER_JOB = 8
MAX_MESSAGE_CHARS = 1000


def bounded_tail(text: str, *, lines: int = MAX_TAIL_LINES, max_bytes: int = MAX_TAIL_BYTES) -> str:
    """The end of ``text``: at most ``lines`` lines and ``max_bytes`` bytes of UTF-8, cut at a
    line start where it can be (a single longer line is cut at a character boundary)."""
    kept = "".join(text.splitlines(keepends=True)[-lines:]) if lines else ""
    data = kept.encode("utf-8")
    if len(data) <= max_bytes:
        return kept
    data = data[-max_bytes:]
    newline = data.find(b"\n")
    if 0 <= newline < len(data) - 1:
        data = data[newline + 1:]
    return data.decode("utf-8", errors="ignore")


class LogTailQuerySet(models.QuerySet):
    def keep(self, job_id: int, *, pod: str, container: str, text: str, exit_code: int | None = None,
             reason: str = "", message: str = "", restarts: int = 0, ended_at: str = "") -> bool:
        """Keep the end of ``text`` for one failed container of a job; a later failure of the
        same container replaces it. Returns False when nothing was kept: the job is gone, or
        it already keeps `MAX_TAILS_PER_JOB` other containers."""
        fields = {"text": bounded_tail(text), "exit_code": exit_code, "reason": reason[:64],
                  "message": message[:MAX_MESSAGE_CHARS], "restarts": restarts, "ended_at": ended_at[:64],
                  "captured_at": timezone.now()}
        if self.filter(job_id=job_id, pod=pod, container=container).update(**fields):
            return True
        if self.filter(job_id=job_id).count() >= MAX_TAILS_PER_JOB:
            return False
        jobs = self.model._meta.get_field("job").related_model.objects
        if not jobs.filter(pk=job_id).exists():
            return False
        self.create(job_id=job_id, pod=pod, container=container, **fields)
        return True


class LogTail(models.Model):
    """The end of one failed container's log (``MAX_TAIL_LINES`` lines, ``MAX_TAIL_BYTES`` bytes)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="log_tails")
    pod = models.CharField(max_length=253)
    container = models.CharField(max_length=63)
    exit_code = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True, help_text="The container's termination message.")
    restarts = models.PositiveIntegerField(default=0)
    # The run's end as the container status says it (finishedAt): tells this run from the next.
    ended_at = models.CharField(max_length=64, blank=True)
    text = models.TextField(blank=True)
    captured_at = models.DateTimeField(default=timezone.now)

    objects = LogTailQuerySet.as_manager()

    class Meta:
        ordering = ["-captured_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "pod", "container"], name="log_tail_one_per_container",
                                    violation_error_message="A container keeps one log tail."),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.pod}/{self.container} (exit {self.exit_code})"

    @property
    def ended(self) -> str:
        """How the container ended, in words: "exit code 1 (Error): message"."""
        said = f"exit code {self.exit_code}" if self.exit_code is not None else "ended"
        if self.reason:
            said += f" ({self.reason})"
        return f"{said}: {self.message}" if self.message else said
