"""What the job page and the feasibility words say of a job whose head holds no GPU (Ray:
`WorkKind.head_without_gpus`): "head + 2 x 4 GPUs (8)". Mixed into `jobs.models.Job`."""


class RayRules:
    def need_words(self, gpus: int) -> str:
        """What a job needs to start, in words: "8 GPUs", or with a head that holds none
        "head + 2 x 4 GPUs (8)"."""
        if self.work_kind.head_without_gpus:
            return f"head + {self.workers} x {self.gpus_per_worker} GPUs ({gpus})"
        return f"{gpus} GPUs"
