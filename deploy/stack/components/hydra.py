"""Ory Hydra, the local OpenID Connect provider of the SSO tests (deploy/local-idp/idp.sh).

Public port: the issuer (HTTPS, the kube-apiserver accepts only an https issuer); admin: plain
HTTP for registering clients and answering login and consent; app: where the login, consent
and logout pages are served (by the browser tests' LoginApp, nothing by default).
"""

from ..component import Build, Component, Site


def arguments(site: Site) -> dict[str, list[str]]:
    """`site.cluster_dir` is the provider's own directory (idp.sh writes hydra.yml there).
    --dev lets clients use http:// redirect URIs (the test client's); never so in production."""
    return {"hydra": ["serve", "all", "--dev", "--sqa-opt-out", "--config", f"{site.cluster_dir}/hydra.yml"]}


COMPONENT = Component(
    name="hydra",
    module="github.com/ory/hydra/v2",
    version="v2.3.0",
    build=Build(packages={"hydra": "github.com/ory/hydra/v2"}, wrapper="deploy/local-idp/module", tags="sqlite"),
    ports={"public": 14444, "admin": 14445, "app": 14446},
    readiness=("http://127.0.0.1:{admin}/health/ready", "https://127.0.0.1:{public}/.well-known/openid-configuration"),
    arguments=arguments,
)
