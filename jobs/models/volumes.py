"""A team's named volumes (one PersistentVolumeClaim each, `jobs.tasks.TEAM_VOLUMES`) and how
a job mounts them (`JobVolumes`, mixed into Job: the job's ``volumes``, name -> mount path).

Owners (and quota managers) create and delete volumes through the platform; members mount
them. A volume fits the team's storage quota on its class (`quotas.StorageQuota`, which the
namespace's ResourceQuota holds as well), and a volume a live job mounts is not deleted.
"""

import posixpath

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.db.models import Sum

from core.validators import between, validate_dns1123_label
from quotas.models import MAX_STORAGE_GIB, StorageQuota
from tenants.models import Membership, Team
from tenants.roles import is_quota_manager
from workloads.pods import HOME_PATH

from ..lifecycle import FINAL_STATES

VOLUME_NAME_MAX_LENGTH = 63
# Paths a volume may not be mounted on: the system's own and the platform's.
RESERVED_MOUNT_PREFIXES = ("/dev", "/proc", "/sys", "/etc", "/bin", "/sbin", "/lib", "/usr", "/var/run", "/run")


class VolumeQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(team__in=Team.objects.visible_to(user))

    def add(self, *, team: Team, user, **fields) -> "Volume":
        """A new volume of the team, by an owner or a quota manager, if it fits the team's
        storage quota (checked with the team's row locked: two at once cannot both fit)."""
        if not Volume.can_manage(team, user):
            raise PermissionDenied("Only the team's owners create its volumes.")
        with transaction.atomic():
            Team.objects.select_for_update().filter(pk=team.pk).first()
            volume = Volume(team=team, created_by=user, **fields)
            volume.full_clean()
            volume.save()
        return volume


class Volume(models.Model):
    """A named volume of a team: a claim of `size_gib` on a storage class."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="volumes")
    name = models.CharField(max_length=VOLUME_NAME_MAX_LENGTH, validators=[validate_dns1123_label],
                            help_text="Lowercase letters, digits and '-', e.g. model-cache. Unique in the team.")
    storage_class = models.CharField(max_length=63, validators=[validate_dns1123_label],
                                     help_text="A storage class the team has a storage quota on.")
    size_gib = models.PositiveIntegerField(validators=between(1, MAX_STORAGE_GIB), help_text="Size in GiB.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VolumeQuerySet.as_manager()

    class Meta:
        ordering = ["team", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="one_volume_name_per_team",
                                               violation_error_message="The team already has a volume of this name.")]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.name}"

    @staticmethod
    def can_manage(team: Team, user) -> bool:
        """Owners and quota managers create and delete a team's volumes; members mount them."""
        return is_quota_manager(user) or team.role_of(user) == Membership.Role.OWNER

    def clean(self) -> None:
        if not (self.team_id and self.storage_class and self.size_gib):
            return
        quota = StorageQuota.objects.filter(team_id=self.team_id, storage_class=self.storage_class).first()
        if quota is None:
            classes = sorted(StorageQuota.objects.filter(team_id=self.team_id).values_list("storage_class", flat=True))
            where = f" Its classes: {', '.join(classes)}." if classes else " A quota manager can give it one."
            raise ValidationError({"storage_class": f"Team {self.team.slug} has no storage quota on "
                                                    f"{self.storage_class}.{where}"})
        others = Volume.objects.filter(team_id=self.team_id, storage_class=self.storage_class).exclude(pk=self.pk)
        if others.count() >= quota.volumes:
            raise ValidationError({"name": f"The team has its {quota.volumes} volumes of {self.storage_class} "
                                           "already; delete one or ask a quota manager for more."})
        used = others.aggregate(total=Sum("size_gib"))["total"] or 0
        if used + self.size_gib > quota.storage_gib:
            raise ValidationError({"size_gib": f"{self.size_gib} GiB does not fit: the team's volumes of "
                                               f"{self.storage_class} claim {used} of its {quota.storage_gib} GiB."})

    def mounted_by(self):
        """The team's jobs that mount this volume and have not ended."""
        return self.team.jobs.filter(volumes__has_key=self.name).exclude(state__in=FINAL_STATES)

    def delete_by(self, user) -> None:
        """Delete the volume (its claim goes with the next reconcile of the team's volumes),
        unless a live job mounts it. The team's row is locked so a job submitted meanwhile
        cannot mount it between the check and the delete."""
        if not Volume.can_manage(self.team, user):
            raise PermissionDenied("Only the team's owners delete its volumes.")
        with transaction.atomic():
            Team.objects.select_for_update().filter(pk=self.team_id).first()
            users = list(self.mounted_by().values_list("name", flat=True)[:5])
            if users:
                raise ValidationError(f"Volume {self.name} is mounted by {', '.join(users)}; cancel or wait for "
                                      "those jobs first.", code="in_use")
            self.delete()


def mount_problems(team_id, volumes) -> str:
    """Why a job of the team cannot mount ``volumes`` (name -> mount path), "" when it can."""
    if not isinstance(volumes, dict):
        return "Volumes must be a mapping of volume name to mount path."
    paths = list(volumes.values())
    for name, path in volumes.items():
        if not isinstance(path, str) or not path.startswith("/") or posixpath.normpath(path) != path:
            return f"Mount {name} at an absolute path without '..' or a trailing '/', e.g. /data."
        if path == "/" or any(path == p or path.startswith(p + "/") for p in RESERVED_MOUNT_PREFIXES):
            return f"{path} is a system path; mount {name} elsewhere, e.g. /data or {HOME_PATH}."
        if path in ("/dev/shm", "/tmp") or paths.count(path) > 1:
            return f"{path} is mounted twice or is the platform's; give {name} a path of its own."
    known = set(Volume.objects.filter(team_id=team_id, name__in=list(volumes)).values_list("name", flat=True)) \
        if volumes else set()
    missing = sorted(set(volumes) - known)
    if missing:
        return f"The team has no volume named {', '.join(missing)}; an owner creates volumes on the team's page."
    return ""


class JobVolumes:
    def volume_problems(self) -> dict[str, str]:
        """A field error for volumes the job cannot mount."""
        if not self.volumes or not self.team_id:
            return {}
        why = mount_problems(self.team_id, self.volumes)
        return {"volumes": why} if why else {}


def claims_of(team: Team) -> list[Volume]:
    """The team's volumes, as the renderer of its claims reads them."""
    return list(Volume.objects.filter(team=team))


__all__ = ["HOME_PATH", "VOLUME_NAME_MAX_LENGTH", "JobVolumes", "Volume", "VolumeQuerySet", "claims_of",
           "mount_problems"]

