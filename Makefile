# The two commands of the README are `make demo` and `make test`.
.PHONY: demo test cluster-up cluster-down cluster-status demo-cluster-down clean bench-reconcile bench-api soak soak-cluster-down

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

demo-cluster-down:  ## stop the cluster make demo started (its own, beside the tests' one)
	@GPUPLATFORM_CLUSTER_DIR=$(HOME)/.cache/gpuplatform/demo-cluster GPUPLATFORM_CLUSTER_PORT_OFFSET=1000 \
	  deploy/local-cluster/cluster.sh down

clean:  ## stop the test servers and remove local state (keeps build caches)
	@scripts/services.sh down
	rm -rf var/

bench-reconcile:  ## our reconciler vs kubectl apply --server-side (needs make cluster-up)
	@scripts/venv.sh dev
	@deploy/local-cluster/cluster.sh up >/dev/null
	@.venv/bin/python bench/reconcile.py

bench-api:  ## REST API latency under 20 concurrent clients (gunicorn + PostgreSQL, 100k jobs)
	@scripts/venv.sh dev
	@env_lines=$$(scripts/services.sh up); \
	for line in $$env_lines; do export "$$line"; done; \
	.venv/bin/python bench/api_bench.py

soak:  ## a compressed day of operation on a local cluster of its own (SOAK_MINUTES, default 10)
	@scripts/venv.sh dev
	@env_lines=$$(scripts/services.sh up); \
	for line in $$env_lines; do export "$$line"; done; \
	.venv/bin/python -m bench.soak

soak-cluster-down:  ## stop the cluster make soak started (its own, beside the tests' and the demo's)
	@GPUPLATFORM_CLUSTER_DIR=$(HOME)/.cache/gpuplatform/soak-cluster GPUPLATFORM_CLUSTER_PORT_OFFSET=2000 \
	  deploy/local-cluster/cluster.sh down
