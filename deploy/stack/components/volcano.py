"""Volcano's scheduler and controller manager (deploy/local-cluster/cluster.sh); its CRDs come
from the same module.

volcano.sh/volcano's go.mod replaces volcano.sh/apis with a directory its module zip lacks, and
the proxy serves no volcano.sh/apis v1.15.x: the build uses v1.14.0 plus one file of ours
(deploy/local-cluster/modules/volcano/apis-compat; cluster.sh prepare_volcano_build)."""

from ..component import Build, Component

COMPONENT = Component(
    name="volcano",
    module="volcano.sh/volcano",
    version="v1.15.1",
    build=Build(packages={"vc-scheduler": "volcano.sh/volcano/cmd/scheduler",
                          "vc-controller-manager": "volcano.sh/volcano/cmd/controller-manager"},
                wrapper="deploy/local-cluster/modules/volcano",
                ldflags="-s -w -X volcano.sh/volcano/pkg/version.Version={version}"),
    ports={"scheduler_metrics": 16880, "scheduler_health": 16251,
           "controller_metrics": 16881, "controller_health": 16252},
    readiness=("http://127.0.0.1:{scheduler_health}/healthz", "http://127.0.0.1:{controller_health}/healthz"),
    requires={"apis": "volcano.sh/apis@v1.14.0"},
)
