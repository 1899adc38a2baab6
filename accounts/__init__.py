"""Single sign-on and personal access: OIDC login, IdP group mappings, API tokens, and who
may do what in a team (docs/sso.md). The rules and rows live in ``tenants``; this app is
their edge (views, API, admin)."""
