"""Finding 15 (issue 29): the chart had no Secret slot for OIDC_CLIENT_SECRET, and the install
docs sent every other setting, the IdP client's secret included, to `config.extraEnv`: the
settings ConfigMap, readable by whoever may read ConfigMaps in the namespace.

Now the client secret goes into the chart's Secret (`secrets.oidcClientSecret`), the key of
an existing Secret, or a Secret of its own (`secrets.oidcExistingSecret`); the values
schema refuses it, and every other secret, in `config.extraEnv`. Here what the install docs
say; the chart rendered by real Helm: tests/live/security/test_finding_15_oidc_client_secret_in_a_secret.py."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_finding_15_the_docs_put_the_client_secret_in_a_secret():
    install, sso = ((REPO / "docs" / name).read_text() for name in ("install.md", "sso.md"))
    for text in (install, sso):
        assert "secrets.oidcClientSecret" in text and "secrets.oidcExistingSecret" in text
    assert "refused there by the values schema" in install  # extraEnv is not for secrets
