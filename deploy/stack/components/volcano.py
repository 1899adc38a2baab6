"""Volcano's scheduler and controller manager (deploy/local-cluster/cluster.sh); its CRDs come
from the same module.

volcano.sh/volcano's go.mod replaces volcano.sh/apis with a directory its module zip lacks, and
the proxy serves no volcano.sh/apis v1.15.x: the build uses v1.14.0 plus one file of ours
(deploy/local-cluster/modules/volcano/apis-compat; cluster.sh prepare_volcano_build)."""

from ..component import Build, Component, Site


def arguments(site: Site) -> dict[str, list[str]]:
    def listen(part: str) -> list[str]:
        return ["--enable-healthz=true", "--healthz-address", f"127.0.0.1:{COMPONENT.port(f'{part}_health', site.offset)}",
                "--listen-address", f"127.0.0.1:{COMPONENT.port(f'{part}_metrics', site.offset)}"]

    common = ["--kubeconfig", site.kubeconfig, "--leader-elect=false", "--scheduler-name", "volcano"]
    return {
        "vc-controller-manager": [*common, *listen("controller"), "--v=2"],
        "vc-scheduler": [*common, "--scheduler-conf", f"{site.config_dir}/volcano-scheduler.conf", *listen("scheduler"),
                         "--cache-dumper=false", "--v=2"],
    }


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
    arguments=arguments,
)
