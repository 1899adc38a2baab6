# The two commands of the README are `make demo` and `make test`.
.PHONY: image helm chart-lint demo test cluster-up cluster-down cluster-status idp-up idp-down idp-status demo-cluster-down clean bench-reconcile bench-api bench-pages bench-watcher bench-e2e bench-eta e2e-cluster-down soak soak-cluster-down

demo:  ## start the platform with demo data (SQLite unless DATABASE_URL is set)
	@scripts/demo.sh

test:  ## run the whole test suite on real PostgreSQL and Redis
	@scripts/test.sh

cluster-up:  ## build (first time) and start the local GPU cluster
	@deploy/local-cluster/cluster.sh up

cluster-down:
	@deploy/local-cluster/cluster.sh down

cluster-status:
	@deploy/local-cluster/cluster.sh status

idp-up:  ## build (first time) and start the local OIDC provider (Ory Hydra) the SSO tests use
	@deploy/local-idp/idp.sh up

idp-down:
	@deploy/local-idp/idp.sh down

idp-status:
	@deploy/local-idp/idp.sh status

demo-cluster-down:  ## stop the cluster make demo started (its own, beside the tests' one)
	@GPUPLATFORM_PROFILE=demo deploy/local-cluster/cluster.sh down

clean:  ## stop the test servers and remove local state (keeps build caches)
	@scripts/services.sh down
	rm -rf var/

bench-reconcile:  ## our reconciler vs kubectl apply --server-side (needs make cluster-up)
	@scripts/venv.sh dev
	@deploy/local-cluster/cluster.sh up >/dev/null
	@.venv/bin/python bench/reconcile.py

bench-api:  ## REST API latency under 20 concurrent clients (gunicorn + PostgreSQL, 100k jobs)
	@scripts/venv.sh dev
	@scripts/with-services.sh .venv/bin/python bench/api_bench.py

bench-watcher:  ## the status watcher's memory at 10k live jobs on the local cluster (BENCH_WATCHER_JOBS; BENCH_WATCHER_KEEP=1 keeps them)
	@scripts/venv.sh dev
	@deploy/local-cluster/cluster.sh up >/dev/null
	@scripts/with-services.sh .venv/bin/python bench/watcher_memory.py

bench-pages:  ## the web pages at 1,000 teams and 100k jobs: queries, p50/p95 (PostgreSQL, test client)
	@scripts/venv.sh dev
	@scripts/with-services.sh .venv/bin/python bench/pages.py

bench-e2e:  ## submit -> admitted -> succeeded through the real processes, against Kueue alone (BENCH_E2E_JOBS, default 1000)
	@scripts/venv.sh dev
	@scripts/with-services.sh .venv/bin/python bench/e2e.py

e2e-cluster-down:  ## stop the cluster make bench-e2e started (its own: the e2e profile, deploy/stack/profiles.py)
	@GPUPLATFORM_PROFILE=e2e deploy/local-cluster/cluster.sh down

soak:  ## a compressed day of operation on a local cluster of its own (SOAK_MINUTES, default 10)
	@scripts/venv.sh dev
	@scripts/with-services.sh .venv/bin/python -m bench.soak

soak-cluster-down:  ## stop the cluster make soak started (its own, beside the tests' and the demo's)
	@GPUPLATFORM_PROFILE=soak deploy/local-cluster/cluster.sh down

image:  ## the platform's OCI image (mmdebstrap + buildah, as root): var/image/gpuplatform-<version>.oci.tar
	@deploy/image/build.sh

helm:  ## build Helm from its Go module into ~/.cache/gpuplatform/bin (cached by version)
	@deploy/helm/build-helm.sh

chart-lint:  ## helm lint the chart with its defaults and the production example
	@h=$$(deploy/helm/build-helm.sh) && $$h lint --strict deploy/helm/gpuplatform && \
	  $$h lint --strict deploy/helm/gpuplatform -f deploy/helm/values-production.example.yaml

bench-eta:  ## the start estimate replayed offline on two generated traces (Alibaba GPU 2023-like, a bursty week); no servers
	@scripts/venv.sh dev
	@.venv/bin/python bench/eta.py
