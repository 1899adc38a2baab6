"""Idle-GPU policies: when a running job whose GPUs sit idle is warned and then reclaimed.

The defaults come from settings (``IDLE_GPU_THRESHOLD_PERCENT``, ``IDLE_GPU_AFTER_SECONDS``,
``IDLE_GPU_GRACE_SECONDS``; reclaim is off when they are unset). A flavor's policy (a row
with no team) changes them for the flavor; a quota manager may override them for one team
on a flavor (a row with the team). Each value left empty is inherited from the level above,
so a team's row that only raises the grace keeps the flavor's threshold. What counts as idle
is ``jobs.use.idle``; the flow (warn, clear, reclaim) is ``jobs.use.reclaim``.
"""

from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from core.validators import between
from tenants.models import Team

from .flavors import GpuFlavor

MAX_IDLE_SECONDS = 30 * 24 * 3600
# Pages and the API read the (few) policies from the shared cache, so a job's page costs no
# query for them; a policy saved or deleted drops the copy, and it lives CACHE_SECONDS at most.
CACHE_KEY = "quotas:idle-policies"
CACHE_SECONDS = 30
# The shortest idle time and grace a policy may set; the soak and the live tests use seconds.
MIN_IDLE_SECONDS = 10


class Action(models.TextChoices):
    RECLAIM = "reclaim", "Warn, then reclaim"
    WARN = "warn", "Warn only"
    OFF = "off", "Off"


@dataclass(frozen=True)
class IdleRules:
    """The policy in force for one team on one flavor, every value resolved."""

    action: str
    threshold_percent: int | None
    idle_after_seconds: int | None
    grace_seconds: int | None
    owners_may_exempt: bool
    source: str  # where the action came from: "settings", "flavor" or "team"
    exempt_because: str = ""  # the flavor's GPUs cannot be measured per pod (time-sliced, MPS)

    @property
    def complete(self) -> bool:
        return None not in (self.threshold_percent, self.idle_after_seconds, self.grace_seconds)

    @property
    def watches(self) -> bool:
        """Whether idle jobs are looked for at all (warned, and maybe reclaimed)."""
        return self.action != Action.OFF and self.complete and not self.exempt_because

    @property
    def reclaims(self) -> bool:
        return self.watches and self.action == Action.RECLAIM

    def describe(self) -> str:
        if self.exempt_because:
            return self.exempt_because
        if not self.watches:
            return "Idle GPUs are not reclaimed."
        verb = "reclaimed" if self.reclaims else "told"
        return (f"A job whose GPUs all stay below {self.threshold_percent} % for {_span(self.idle_after_seconds)} "
                f"is warned, and {verb} {_span(self.grace_seconds)} later unless it is busy again.")


def _span(seconds: int) -> str:
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def default_rules() -> IdleRules:
    """The settings' policy: reclaim when the three values are set, else off."""
    values = (settings.IDLE_GPU_THRESHOLD_PERCENT, settings.IDLE_GPU_AFTER_SECONDS, settings.IDLE_GPU_GRACE_SECONDS)
    return IdleRules(action=Action.RECLAIM if None not in values else Action.OFF,
                     threshold_percent=values[0], idle_after_seconds=values[1], grace_seconds=values[2],
                     owners_may_exempt=settings.IDLE_GPU_OWNERS_MAY_EXEMPT, source="settings")


class IdlePolicyQuerySet(models.QuerySet):
    def delete(self):
        deleted = super().delete()
        cache.delete(CACHE_KEY)
        return deleted

    def update(self, **kwargs):
        updated = super().update(**kwargs)
        cache.delete(CACHE_KEY)
        return updated

    def rules_for(self, pairs, *, cached: bool = False) -> dict[tuple[int, int], IdleRules]:
        """(team id, flavor id) -> `IdleRules`, for every pair given, from one query (none
        with ``cached``: the shared cache's copy, for pages); ``pairs`` are (team, flavor)
        objects (team None: the flavor's own policy), so the flavor's sharing is known
        without a query."""
        pairs = list(pairs)
        if cached:
            rows = cache.get(CACHE_KEY)
            if rows is None:
                rows = {(row.team_id, row.flavor_id): row for row in self.all()}
                cache.set(CACHE_KEY, rows, CACHE_SECONDS)
        else:
            flavors = {flavor.pk for _, flavor in pairs}
            rows = {(row.team_id, row.flavor_id): row for row in self.filter(flavor_id__in=flavors)} if pairs else {}
        base = default_rules()
        rules = {}
        for team, flavor in pairs:
            key = (team.pk if team is not None else None, flavor.pk)
            resolved = base
            levels = [("flavor", rows.get((None, flavor.pk)))] + ([("team", rows.get(key))] if team is not None else [])
            for level, row in levels:
                if row is not None:
                    resolved = row.over(resolved, level)
            rules[key] = IdleRules(**{**resolved.__dict__, "exempt_because": flavor.idle_exempt_because})
        return rules

    def rules(self, team, flavor, *, cached: bool = False) -> IdleRules:
        return self.rules_for([(team, flavor)], cached=cached)[(team.pk if team is not None else None, flavor.pk)]


class IdlePolicy(models.Model):
    """A flavor's idle-GPU policy (no team), or a quota manager's override for one team."""

    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE, related_name="idle_policies")
    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, null=True, blank=True, related_name="idle_policies",
        help_text="Empty: the flavor's policy for every team. Set: this team's override.")
    action = models.CharField(max_length=10, choices=Action, blank=True,
                              help_text="Empty: inherited (the flavor's, then the settings').")
    threshold_percent = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=between(1, 100),
        help_text="A GPU is idle in a window when its activity stays below this percentage.")
    idle_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=between(MIN_IDLE_SECONDS, MAX_IDLE_SECONDS),
        help_text="How long every GPU of a job must stay idle before the job is warned.")
    grace_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=between(0, MAX_IDLE_SECONDS),
        help_text="How long after the warning the job is reclaimed, unless it is busy again.")
    owners_may_exempt = models.BooleanField(
        null=True, blank=True, help_text="Whether a team owner may exempt a job, with a reason. Empty: inherited.")
    note = models.TextField(blank=True, help_text="Why this policy (shown to quota managers).")

    history = HistoricalRecords()  # the audit trail (quotas/audit.py)
    objects = IdlePolicyQuerySet.as_manager()

    class Meta:
        verbose_name = "idle-GPU policy"
        verbose_name_plural = "idle-GPU policies"
        ordering = ["flavor__name", "team__slug"]
        constraints = [
            models.UniqueConstraint(fields=["flavor"], condition=Q(team__isnull=True), name="idle_policy_one_per_flavor",
                                    violation_error_message="The flavor already has an idle-GPU policy."),
            models.UniqueConstraint(fields=["flavor", "team"], name="idle_policy_one_per_team_and_flavor",
                                    violation_error_message="The team already has an idle-GPU policy on this flavor."),
            models.CheckConstraint(
                condition=Q(threshold_percent__isnull=True) | Q(threshold_percent__gte=1, threshold_percent__lte=100),
                name="idle_policy_threshold_in_range",
                violation_error_message="The threshold is a percentage between 1 and 100."),
        ]

    def __str__(self) -> str:
        return f"{self.flavor.name} idle policy" + (f" for {self.team.slug}" if self.team_id else "")

    def save(self, *args, **kwargs):
        super().save(*args, **kwargs)
        cache.delete(CACHE_KEY)

    def delete(self, *args, **kwargs):
        deleted = super().delete(*args, **kwargs)
        cache.delete(CACHE_KEY)
        return deleted

    def over(self, inherited: IdleRules, level: str) -> IdleRules:
        """``inherited`` with this row's values where it sets them."""
        return IdleRules(
            action=self.action or inherited.action,
            threshold_percent=self.threshold_percent if self.threshold_percent is not None else inherited.threshold_percent,
            idle_after_seconds=(self.idle_after_seconds if self.idle_after_seconds is not None
                                else inherited.idle_after_seconds),
            grace_seconds=self.grace_seconds if self.grace_seconds is not None else inherited.grace_seconds,
            owners_may_exempt=(self.owners_may_exempt if self.owners_may_exempt is not None
                               else inherited.owners_may_exempt),
            source=level if self.action else inherited.source,
        )

    def clean(self) -> None:
        if self.flavor_id and self.flavor.idle_exempt_because and self.action and self.action != Action.OFF:
            raise ValidationError({"action": self.flavor.idle_exempt_because})
