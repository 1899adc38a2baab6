#!/usr/bin/env bash
# Run a command with the test servers' environment: scripts/services.sh starts PostgreSQL and
# Redis (those DATABASE_URL / REDIS_URL do not already name) and says how to reach them.
#   scripts/with-services.sh .venv/bin/python bench/pages.py
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 <command> [args...]" >&2; exit 2; }
env_lines=$("$(dirname "$0")/services.sh" up)
while IFS= read -r line; do [ -n "$line" ] && export "${line?}"; done <<<"$env_lines"
exec "$@"
