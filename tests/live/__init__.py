"""The tests that need a server or a build the unit tests do without: the local Kubernetes
cluster (`kube_cluster`, marker `cluster`), KEDA on it, Helm, the local IdP (`hydra`, marker
`idp`); tests/fixtures/ starts them on first use. They are the `cluster` and `second-cluster`
shards (tests/conftest.py); every test outside tests/live/ runs in the `unit` shard, with
PostgreSQL and Redis only (the browser tests included: Playwright against pytest-django's
live server). tests/conftest.py fails the collection of a test that sits on the wrong side.
Laid out as the unit tests are: tests/live/security/ holds the live half of a finding whose
other half is in tests/security/, under the same file name."""
