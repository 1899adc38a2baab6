#!/usr/bin/env bash
# Start the platform with working defaults: SQLite, demo data, web server, Celery worker
# and beat, the status watcher, and the local GPU cluster when it has been built.
# Whatever is missing is replaced by an embedded fallback and said so.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh
export DEBUG="${DEBUG:-true}"
host="${HOST:-127.0.0.1}" port="${PORT:-8000}"
py=.venv/bin/python
logs=var/log
mkdir -p "$logs"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

# 1. Broker: a private Redis when the server is installed, else a spool folder under var/.
if [ -z "${CELERY_BROKER_URL:-}" ]; then
  if command -v redis-server >/dev/null; then
    while IFS= read -r line; do [ -n "$line" ] && export "${line?}"; done < <(scripts/services.sh redis)
    # The demo's database of the private Redis (deploy/stack/profiles.py): the test suite
    # uses others, and the two must never share a queue.
    REDIS_URL=$(python3 -E -m deploy.stack.profiles redis-url demo "$REDIS_URL")
    export REDIS_URL CELERY_BROKER_URL="$REDIS_URL"
    echo "==> broker: Redis at $REDIS_URL"
  else
    export CELERY_BROKER_URL="filesystem://" CELERY_RESULT_BACKEND="cache+memory://"
    echo "==> broker: no redis-server here, using a spool folder under var/ (apt-get install redis-server for Redis)"
  fi
fi

# 2. Cluster: a local GPU cluster of the demo's own (separate state and ports from the one
#    the test suite uses, so demo workloads never take the tests' fake GPUs), if the
#    binaries have been built (make cluster-up builds them once).
cluster=deploy/local-cluster/cluster.sh
export GPUPLATFORM_PROFILE="${GPUPLATFORM_PROFILE:-demo}"  # deploy/stack/profiles.py
if [ -z "${KUBECONFIG:-}" ] && "$cluster" built >/dev/null 2>&1; then
  echo "==> starting the demo's local GPU cluster (make demo-cluster-down stops it)"
  KUBECONFIG=$("$cluster" up --json | python3 -E -c 'import json, sys; print(json.load(sys.stdin)["kubeconfig"])')
  export KUBECONFIG
elif [ -z "${KUBECONFIG:-}" ]; then
  echo "==> no cluster: run 'make cluster-up' once to build the local GPU cluster; until then"
  echo "    jobs and teams stay pending and the UI says so."
fi

# 3. Database and demo data.
echo "==> database: ${DATABASE_URL:-SQLite at var/gpuplatform.sqlite3}"
$py manage.py migrate --no-input -v 0
$py manage.py seed_demo

# 4. Background processes: worker with embedded beat, the webhook sender (its own queue, so
#    a slow receiver never holds up a reconcile), and the watcher when there is a cluster.
.venv/bin/celery -A gpuplatform worker --queues celery --beat --concurrency 1 --loglevel INFO \
  --schedule var/celerybeat-schedule >"$logs/worker.log" 2>&1 &
pids+=($!)
.venv/bin/celery -A gpuplatform worker --queues webhooks --hostname "webhooks@%h" --concurrency 1 \
  --loglevel INFO >"$logs/webhooks.log" 2>&1 &
pids+=($!)
echo "==> Celery worker and beat started (logs: $logs/worker.log), webhook sender ($logs/webhooks.log)"
if [ -n "${KUBECONFIG:-}" ]; then
  $py manage.py reconcile --all >"$logs/reconcile.log" 2>&1 || echo "    first reconcile failed, see $logs/reconcile.log"
  $py manage.py watch_cluster >"$logs/watcher.log" 2>&1 &
  pids+=($!)
  echo "==> status watcher started (logs: $logs/watcher.log)"
fi

echo
echo "GPU Platform is starting at http://$host:$port/  (admin console: http://$host:$port/admin/)"
echo "Agents: the read-only MCP server is at http://$host:$port/mcp, with an API token (docs/mcp.md)."
echo "Stop it with Ctrl-C."
$py manage.py runserver --noreload "$host:$port"
