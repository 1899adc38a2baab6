"""Team storage quotas: how much a team's volumes may claim of one storage class, in GiB and
in volumes. The namespace's ResourceQuota holds them (`quotas.manifests.namespace_ceilings`:
``<class>.storageclass.storage.k8s.io/requests.storage`` and ``.../persistentvolumeclaims``,
and their sums), so a claim beyond them is refused by the API server too; the volumes
themselves are the team's (`jobs.models.volumes.Volume`)."""

from django.db import models
from simple_history.models import HistoricalRecords

from core.validators import between, validate_dns1123_label
from tenants.models import Team

MAX_STORAGE_GIB = 1024 * 1024  # a PiB
MAX_VOLUMES = 1000


class StorageQuotaQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(team__in=Team.objects.visible_to(user))


class StorageQuota(models.Model):
    """A team's room on one storage class."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="storage_quotas")
    storage_class = models.CharField(
        max_length=63, validators=[validate_dns1123_label],
        help_text="The cluster's StorageClass, by name (e.g. standard, fast-ssd).")
    storage_gib = models.PositiveIntegerField(
        validators=between(0, MAX_STORAGE_GIB), help_text="GiB the team's volumes of this class may claim in all.")
    volumes = models.PositiveIntegerField(
        default=10, validators=between(0, MAX_VOLUMES), help_text="How many volumes of this class the team may have.")
    history = HistoricalRecords()

    objects = StorageQuotaQuerySet.as_manager()

    class Meta:
        ordering = ["team", "storage_class"]
        constraints = [models.UniqueConstraint(fields=["team", "storage_class"], name="one_storage_quota_per_class",
                                               violation_error_message="The team already has a quota on this "
                                                                       "storage class.")]

    def __str__(self) -> str:
        return f"{self.team.slug} on {self.storage_class}: {self.storage_gib} GiB, {self.volumes} volumes"
