#!/usr/bin/env bash
# Private PostgreSQL and Redis servers for the test suite, on loopback ports of their own.
#   scripts/services.sh up     start them (idempotent) and print the env lines to use
#   scripts/services.sh down   stop them
# A server named by DATABASE_URL / REDIS_URL in the environment is used instead.
set -euo pipefail
dir="${GPUPLATFORM_SERVICES_DIR:-/tmp/gpuplatform-services}"
pg_port="${GPUPLATFORM_PG_PORT:-55432}"
redis_port="${GPUPLATFORM_REDIS_PORT:-56379}"

die() { echo "error: $*" >&2; exit 1; }
# The unit tests' database of our Redis (deploy/stack/profiles.py); others derive theirs from it.
redis_url() { (cd "$(dirname "$0")/.." && python3 -E -m deploy.stack.profiles redis-url unit "redis://127.0.0.1:$redis_port"); }

pg_bin() {
  local bin
  # The newest installed version: sort -V reads the version in the path (no odd names here).
  # shellcheck disable=SC2012
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$bin" ] && [ -x "$bin/initdb" ] || return 1
  echo "$bin"
}

# PostgreSQL refuses to run as root; run it as the 'postgres' user the package creates.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_up() {
  local bin data="$dir/pg"
  bin=$(pg_bin) || die "PostgreSQL server not found: install it (apt-get install postgresql) or set DATABASE_URL"
  mkdir -p "$dir"; chmod 755 "$dir"
  if [ ! -s "$data/PG_VERSION" ]; then
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown postgres: "$data"
    as_pg "$bin/initdb" -D "$data" -U postgres -A trust --no-sync >"$dir/pg-init.log" 2>&1 \
      || die "initdb failed, see $dir/pg-init.log"
  fi
  if ! as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_pg "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start \
      -o "-p $pg_port -k $data -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      >/dev/null || die "PostgreSQL did not start, see $data/server.log"
  fi
}

redis_up() {
  command -v redis-server >/dev/null || die "redis-server not found: install it (apt-get install redis-server) or set REDIS_URL"
  mkdir -p "$dir"
  if ! redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
    redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
      --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir" >/dev/null
    for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    die "Redis did not start, see $dir/redis.log"
  fi
}

case "${1:-up}" in
  up)
    if [ -z "${DATABASE_URL:-}" ]; then
      pg_up
      echo "DATABASE_URL=postgres://postgres@127.0.0.1:$pg_port/gpuplatform"
    fi
    if [ -z "${REDIS_URL:-}" ]; then
      redis_up
      echo "REDIS_URL=$(redis_url)"
    fi
    ;;
  redis)
    redis_up
    echo "REDIS_URL=$(redis_url)"
    ;;
  down)
    if bin=$(pg_bin) && [ -d "$dir/pg" ]; then as_pg "$bin/pg_ctl" -D "$dir/pg" -m fast stop >/dev/null 2>&1 || true; fi
    redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
    ;;
  *) die "usage: $0 up|redis|down" ;;
esac
