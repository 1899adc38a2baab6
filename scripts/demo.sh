#!/usr/bin/env bash
# Start the platform with working defaults: SQLite, demo data, the web server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh
export DEBUG="${DEBUG:-true}"
host="${HOST:-127.0.0.1}" port="${PORT:-8000}"
py=.venv/bin/python
echo "==> database: ${DATABASE_URL:-SQLite at var/gpuplatform.sqlite3}"
$py manage.py migrate --no-input -v 0
$py manage.py seed_demo
echo
echo "GPU Platform is starting at http://$host:$port/  (admin console: http://$host:$port/admin/)"
echo "Stop it with Ctrl-C."
exec $py manage.py runserver "$host:$port"
