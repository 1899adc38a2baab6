"""Demo data for the quota console: an open request and a grant that ends soon.

Called by ``seed_demo``; safe to run again (each item is created once, found by its text).
"""

from datetime import timedelta

from django.utils import timezone

from tenants.models import Team

from . import actions
from .models import GpuFlavor, QuotaGrant, QuotaRequest

PENDING = "Two weeks of extra H100s for the CVPR camera-ready ablations (ViT-L, 3 seeds)."
EXPIRING = "Llama fine-tuning sprint for the workshop demo."


def seed_console(users: dict) -> int:
    """Returns how many items were created."""
    today = timezone.localdate()
    created = 0
    vision, nlp = Team.objects.get(slug="vision"), Team.objects.get(slug="nlp")
    h100, a100 = GpuFlavor.objects.get(name="h100"), GpuFlavor.objects.get(name="a100")
    if not QuotaRequest.objects.filter(team=vision, justification=PENDING).exists():
        QuotaRequest.objects.submit(team=vision, requested_by=users["alice"], flavor=h100, gpus=8,
                                    borrowing_limit_gpus=8, starts_on=today + timedelta(days=3),
                                    ends_on=today + timedelta(days=16), justification=PENDING)
        created += 1
    if not QuotaRequest.objects.filter(team=nlp, justification=EXPIRING).exists():
        request = QuotaRequest.objects.submit(team=nlp, requested_by=users["bob"], flavor=a100, gpus=4,
                                              starts_on=today, ends_on=today + timedelta(days=5),
                                              justification=EXPIRING)
        actions.approve(request, users["quinn"], gpus=4, borrowing_limit_gpus=None, starts_on=today,
                        ends_on=today + timedelta(days=5), cpu_cores=48, memory_gib=480,
                        reason="Approved for the sprint; ask again if the demo moves.")
        created += 1
    # seed_demo resets the quota rows it knows; grants have the last word on theirs.
    for team_id, flavor_id in set(QuotaGrant.objects.values_list("team_id", "flavor_id")):
        actions.apply_grants(team=Team(pk=team_id), flavor=GpuFlavor(pk=flavor_id))
    return created
