"""Team quotas: a team's GPUs on one flavor, and the CPU and memory that go with them."""

import math

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from simple_history.models import HistoricalRecords

from core.validators import between
from tenants.models import Team

from ..grants import CPU_CORES_PER_GPU, MAX_CPU_CORES, MAX_GPUS, MAX_MEMORY_GIB, MEMORY_GIB_PER_GPU
from .flavors import Cohort, GpuFlavor


class QuotaQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(team__in=Team.objects.visible_to(user))

    def resources_for(self, team, flavor, gpus: int) -> tuple[int, int]:
        """CPU cores and memory (GiB) to grant with ``gpus``, in the ratio the team's quota
        for the flavor has (a default ratio when it has no GPUs)."""
        quota = self.filter(team=team, flavor=flavor).first()
        if quota and quota.nominal_gpus:
            cpu, memory = quota.cpu_cores / quota.nominal_gpus, quota.memory_gib / quota.nominal_gpus
        else:
            cpu, memory = CPU_CORES_PER_GPU, MEMORY_GIB_PER_GPU
        rounded = math.ceil if gpus >= 0 else math.floor
        return int(rounded(gpus * cpu)), int(rounded(gpus * memory))

    def of_team(self, team):
        """A team's quotas as the renderers need them: flavor, cohort, what it can borrow."""
        return self.filter(team=team).select_related("flavor", "cohort").with_cohort_lendable()

    def with_cohort_lendable(self):
        """Annotate how many GPUs the other quotas of the same cohort and flavor lend."""
        peers = (
            Quota.objects.filter(cohort=OuterRef("cohort"), flavor=OuterRef("flavor"))
            .exclude(pk=OuterRef("pk"))
            .order_by()
            .values("cohort")
            .annotate(total=Sum(Coalesce("lending_limit_gpus", "nominal_gpus")))
            .values("total")
        )
        return self.annotate(cohort_lendable_gpus=Coalesce(Subquery(peers), 0))


class Quota(models.Model):
    """A team's GPUs on one flavor, plus the CPU and memory that go with them."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quotas")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="quotas")
    cohort = models.ForeignKey(
        Cohort, on_delete=models.PROTECT, null=True, blank=True, related_name="quotas",
        help_text="Quotas in one cohort lend and borrow unused GPUs.",
    )
    nominal_gpus = models.PositiveIntegerField(
        validators=between(0, MAX_GPUS), help_text="GPUs guaranteed to the team.")
    borrowing_limit_gpus = models.PositiveIntegerField(
        null=True, blank=True, validators=between(0, MAX_GPUS),
        help_text="Most GPUs the team may borrow from its cohort; empty means no limit.",
    )
    lending_limit_gpus = models.PositiveIntegerField(
        null=True, blank=True, validators=between(0, MAX_GPUS),
        help_text="Most of its nominal GPUs the team lends to its cohort; empty means all.",
    )
    cpu_cores = models.PositiveIntegerField(
        validators=between(0, MAX_CPU_CORES), help_text="CPU cores for workloads on this flavor.")
    memory_gib = models.PositiveIntegerField(
        validators=between(0, MAX_MEMORY_GIB), help_text="Memory for workloads on this flavor, GiB.")
    weight = models.PositiveSmallIntegerField(
        default=1, validators=between(1, 1000),
        help_text="Fair-sharing weight when the cohort's spare GPUs are shared out.",
    )

    history = HistoricalRecords()
    objects = QuotaQuerySet.as_manager()

    class Meta:
        ordering = ["team__slug", "flavor__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "flavor"],
                name="quota_one_per_team_and_flavor",
                violation_error_message="This team already has a quota for this flavor.",
            ),
            models.CheckConstraint(
                condition=Q(lending_limit_gpus__isnull=True) | Q(lending_limit_gpus__lte=F("nominal_gpus")),
                name="quota_lending_within_nominal",
                violation_error_message="A team cannot lend more GPUs than its nominal quota.",
            ),
            models.CheckConstraint(
                condition=Q(cohort__isnull=False)
                | Q(borrowing_limit_gpus__isnull=True, lending_limit_gpus__isnull=True),
                name="quota_limits_need_cohort",
                violation_error_message="Borrowing and lending limits need a cohort to borrow from.",
            ),
            models.CheckConstraint(
                condition=Q(weight__gte=1),
                name="quota_weight_positive",
                violation_error_message="The fair-sharing weight is at least 1.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug} / {self.flavor.name}: {self.nominal_gpus} GPUs"

    @property
    def ceiling_gpus(self) -> int:
        """The most GPUs this quota can ever put to work: nominal plus what it can borrow.

        Borrowing is bounded by the limit and by what the cohort's other quotas lend; the
        latter comes from ``Quota.objects.with_cohort_lendable()``.
        """
        if self.cohort_id is None:
            return self.nominal_gpus
        lendable = getattr(self, "cohort_lendable_gpus", None)
        if lendable is None:
            lendable = (
                Quota.objects.filter(pk=self.pk).with_cohort_lendable().values_list(
                    "cohort_lendable_gpus", flat=True
                ).first()
                or 0
            )
        borrowable = lendable if self.borrowing_limit_gpus is None else min(lendable, self.borrowing_limit_gpus)
        return self.nominal_gpus + borrowable

    def with_ceiling(self, amount: int) -> int:
        """CPU cores or GiB of memory that go with the GPUs this quota can reach when it
        borrows: `amount` (per nominal quota) grown in proportion to ``ceiling_gpus``."""
        if not self.nominal_gpus:
            return amount
        return math.ceil(amount * self.ceiling_gpus / self.nominal_gpus)

    def clean(self) -> None:
        errors = {}
        if self.lending_limit_gpus is not None and self.lending_limit_gpus > (self.nominal_gpus or 0):
            errors["lending_limit_gpus"] = "Cannot lend more than the nominal quota."
        if self.cohort_id is None:
            for field in ("borrowing_limit_gpus", "lending_limit_gpus"):
                if getattr(self, field) is not None:
                    errors[field] = "Only quotas in a cohort can borrow or lend; pick a cohort."
        if errors:
            raise ValidationError(errors)
