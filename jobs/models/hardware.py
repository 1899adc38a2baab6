"""What a job asks of its flavor's hardware, checked against what the flavor declares
(`quotas.models.hardware`): its GPU memory budget against one unit (a GPU, a MIG slice, a
share of a time-sliced or MPS GPU), one MPS share per pod. (Multi-node training only over a
declared network fabric: the training kind's own check.)"""

from quotas.models import Quota, Sharing
from quotas.models.hardware import gib_text
from quotas.models.topology import TopologyRequest, placement_problem, topology_request

# Read by the CUDA client of an MPS server: a job's own value could raise its memory or
# compute share over the one its quota unit buys (the platform sets them on MPS flavors).
MPS_ENV_PREFIX = "CUDA_MPS_"


class JobHardware:
    @property
    def topology_request(self) -> TopologyRequest | None:
        """Where the job's workers must or should stay together, in its flavor's terms (None:
        anywhere, or a level the flavor lost since the job was submitted)."""
        if "placement" not in self.work_kind.takes or not self.placement:
            return None
        return topology_request(self.flavor, self.placement)

    def hardware_problems(self, flavor) -> dict[str, str]:
        """Field errors for what the flavor's hardware cannot give this job."""
        errors = {}
        if flavor.gpu_sharing == Sharing.MPS and self.gpus_per_worker and self.gpus_per_worker > 1:
            errors["gpus_per_worker"] = (
                f"MPS gives each pod one share of one GPU (the device plugin refuses more); on {flavor.name} ask for "
                "1 GPU per worker, or pick a flavor of whole GPUs.")
        if self.gpu_memory_gib and self.gpu_memory_gib * 1024 > flavor.unit_memory_mib:
            errors["gpu_memory_gib"] = self._memory_refusal(flavor)
        if self.placement and (why := self._placement_refusal(flavor)):
            errors["placement"] = why
        return errors

    def _placement_refusal(self, flavor) -> str:
        if "placement" not in self.work_kind.takes:
            return (f"{self.get_kind_display()} places its pods one by one; keeping workers in one rack applies to "
                    "kinds that run them together.")
        return placement_problem(flavor, self.placement)

    def _memory_refusal(self, flavor) -> str:
        need, share = self.gpu_memory_gib, gib_text(flavor.unit_memory_mib)
        if flavor.gpu_sharing == Sharing.TIME_SLICING:
            said = (f"{flavor.name} time-slices each GPU ({flavor.gpu_memory_gib} GiB) between "
                    f"{flavor.shared_by} pods, {share} each, with no memory isolation: a pod over its share "
                    "crashes its neighbours too. What would fit: fewer pods per GPU, MPS (enforced limits), "
                    "a MIG profile, or a whole GPU.")
        elif flavor.gpu_sharing == Sharing.MPS:
            said = f"MPS limits each share of {flavor.name} to {share}."
        elif flavor.gpu_sharing == Sharing.MIG:
            said = f"the MIG slice of {flavor.name} has {share}."
        else:
            said = f"a GPU of {flavor.name} has {share}."
        fits = sorted({quota.flavor.name for quota in Quota.objects.filter(team_id=self.team_id).select_related("flavor")
                       if quota.flavor.unit_memory_mib >= need * 1024}) if self.team_id else []
        where = (f" The team's flavors where {need} GiB fits: {', '.join(fits)}." if fits
                 else f" None of the team's flavors has {need} GiB per GPU; a quota manager can grant one.")
        return f"The job needs {need} GiB per GPU, but {said}{where}"
