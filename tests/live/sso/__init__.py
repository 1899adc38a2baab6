"""Single sign-on against a real OpenID Connect provider, Ory Hydra (deploy/local-idp; the
fixture: tests/fixtures/idp.py, the client: tests/support/hydra.py)."""
