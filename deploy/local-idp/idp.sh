#!/usr/bin/env bash
# Local OpenID Connect provider for the SSO tests and the demo: Ory Hydra, built from the
# wrapper module next to this file and run as one local process on loopback. Its version,
# build, ports and readiness are declared in deploy/stack/components/hydra.py.
#
#   idp.sh build    build Hydra into ~/.cache/gpuplatform/bin if it is missing
#   idp.sh up       build if needed, start Hydra, wait until ready, print env lines (idempotent)
#   idp.sh down     stop the Hydra this script started
#   idp.sh status   show the process, its ports and issuer
#   idp.sh built    exit 0 when the binary is already built (nothing else)
#
# Hydra keeps everything in memory (DSN=memory): clients, sessions and signing keys start
# afresh with each `up`, so callers (the test fixtures) register the OAuth2 clients they use.
#
# Public port (the issuer): HTTPS with a self-signed CA made here, because the kube-apiserver
# accepts only an https issuer; callers trust $IDP_DIR/pki/ca.crt (OIDC_CA_BUNDLE for Django).
# Admin port: plain HTTP on 127.0.0.1, for registering clients and answering login and
# consent. Hydra runs with --dev so that clients may use http:// redirect URIs (the Django
# test client's http://testserver, the live test server); never run it so in production.
#
# Hydra has no login UI of its own: it sends the browser to IDP_LOGIN_URL / IDP_CONSENT_URL /
# IDP_LOGOUT_URL with a challenge. Nothing listens there by default; the tests read the
# challenge from the redirect and accept it through the admin API (tests/support/hydra.py).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# GPUPLATFORM_IDP_PORT_OFFSET shifts the ports, to run a second provider (with its own
# GPUPLATFORM_IDP_DIR) beside the first.
OFFSET="${GPUPLATFORM_IDP_PORT_OFFSET:-0}"
components() { (cd "$ROOT" && python3 -E -m deploy.stack.components "$@" hydra --offset "$OFFSET"); }
declared=$(components env) || exit 1
# HYDRA_VERSION, HYDRA_BIN, HYDRA_PACKAGE, HYDRA_WRAPPER, HYDRA_TAGS, HYDRA_{PUBLIC,ADMIN,APP}_PORT
while IFS= read -r line; do export "${line?}"; done <<<"$declared"
MODULE="$ROOT/$HYDRA_WRAPPER"
PUBLIC_PORT=$HYDRA_PUBLIC_PORT
ADMIN_PORT=$HYDRA_ADMIN_PORT
APP_PORT=$HYDRA_APP_PORT  # where login/consent/logout would be served (nothing by default)

CACHE_DIR="${GPUPLATFORM_CACHE_DIR:-$HOME/.cache/gpuplatform}"
BIN="$HYDRA_BIN"
IDP_DIR="${GPUPLATFORM_IDP_DIR:-$CACHE_DIR/idp}"
PKI="$IDP_DIR/pki"
LOG="$IDP_DIR/hydra.log"
PIDFILE="$IDP_DIR/hydra.pid"
ISSUER="https://127.0.0.1:$PUBLIC_PORT"
ADMIN_URL="http://127.0.0.1:$ADMIN_PORT"
LOGIN_URL="${IDP_LOGIN_URL:-http://127.0.0.1:$APP_PORT/login}"
CONSENT_URL="${IDP_CONSENT_URL:-http://127.0.0.1:$APP_PORT/consent}"
LOGOUT_URL="${IDP_LOGOUT_URL:-http://127.0.0.1:$APP_PORT/logout}"

log() { printf '[idp %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[idp] ERROR: %s\n' "$*" >&2; exit 1; }

built() { [[ -x "$BIN" ]]; }

cmd_build() {
  built && return 0
  command -v go >/dev/null 2>&1 || die "go is not on PATH (Go >= 1.26 is needed to build Hydra)"
  mkdir -p "$CACHE_DIR/bin"
  log "building Hydra $HYDRA_VERSION (a cold build takes about 10 minutes; cached afterwards)"
  local t0=$SECONDS
  # -mod=mod: go get records the tool and its go.sum lines in the wrapper module (committed).
  (cd "$MODULE" && GOFLAGS=-mod=mod go get -tool "$HYDRA_MODULE@$HYDRA_VERSION" \
    && go build -tags "$HYDRA_TAGS" -o "$BIN.tmp" "$HYDRA_PACKAGE") || die "building Hydra failed"
  mv "$BIN.tmp" "$BIN"
  log "built $BIN in $((SECONDS - t0))s"
}

# The pid of our Hydra: the cached binary, serving with this provider's directory.
find_pid() {
  local p argv0 cmd
  for p in /proc/[0-9]*; do
    { IFS= read -r -d '' argv0 <"$p/cmdline"; } 2>/dev/null || continue
    [[ "$argv0" == "$BIN" ]] || continue
    cmd="$( { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null )" || continue
    [[ "$cmd" == *"--config $IDP_DIR/"* ]] && { echo "${p#/proc/}"; return 0; }
  done
  return 1
}

ensure_pki() {
  [[ -s "$PKI/tls.crt" && -s "$PKI/ca.crt" ]] && return 0
  command -v openssl >/dev/null 2>&1 || die "openssl is needed for the provider's certificate"
  log "certificates: a local CA and a certificate for 127.0.0.1 in $PKI"
  mkdir -p "$PKI" && chmod 700 "$PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 \
    -subj "/CN=gpuplatform-local-idp-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$PKI/tls.key" -out "$PKI/tls.csr" -subj "/CN=127.0.0.1" 2>/dev/null
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$PKI/tls.ext"
  openssl x509 -req -in "$PKI/tls.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/tls.ext" -out "$PKI/tls.crt" 2>/dev/null
  rm -f "$PKI/tls.csr" "$PKI/tls.ext"
}

write_config() {
  [[ -s "$IDP_DIR/secret" ]] || { od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$IDP_DIR/secret"; chmod 600 "$IDP_DIR/secret"; }
  cat >"$IDP_DIR/hydra.yml" <<EOF
# Written by deploy/local-idp/idp.sh at each up; edit the script, not this file.
dsn: memory
serve:
  public: {host: 127.0.0.1, port: $PUBLIC_PORT, tls: {enabled: true}}
  admin: {host: 127.0.0.1, port: $ADMIN_PORT, tls: {enabled: false}}
  tls: {cert: {path: $PKI/tls.crt}, key: {path: $PKI/tls.key}}
  # Hydra's default (SameSite=None) is refused by browsers on a cookie that --dev leaves
  # without Secure; the issuer is https, so Secure + Lax (a top-level redirect keeps it).
  cookies: {same_site_mode: Lax, secure: true}
urls:
  self: {issuer: $ISSUER, public: $ISSUER}
  login: $LOGIN_URL
  consent: $CONSENT_URL
  logout: $LOGOUT_URL
  post_logout_redirect: $ISSUER/oauth2/fallbacks/logout/callback
secrets:
  system: ["$(cat "$IDP_DIR/secret")"]
oauth2:
  pkce: {enforced: true}
log: {level: warn}
EOF
}

ready() { components ready --ca-bundle "$PKI/ca.crt" >/dev/null 2>&1; }

print_env() {
  echo "OIDC_ISSUER=$ISSUER"
  echo "OIDC_CA_BUNDLE=$PKI/ca.crt"
  echo "IDP_ADMIN_URL=$ADMIN_URL"
}

cmd_up() {
  cmd_build
  mkdir -p "$IDP_DIR"
  if ! find_pid >/dev/null; then
    ensure_pki
    write_config
    log "hydra: starting ($ISSUER, admin $ADMIN_URL)"
    local args
    mapfile -t args < <(cd "$ROOT" && python3 -E -m deploy.stack.components args hydra --offset "$OFFSET" \
      --cluster-dir "$IDP_DIR" --config-dir "$ROOT/deploy/local-idp")
    ((${#args[@]})) || die "no command line declared for hydra (deploy/stack/components/hydra.py)"
    SQA_OPT_OUT=true setsid "$BIN" "${args[@]}" >>"$LOG" 2>&1 </dev/null 9>&- &
    echo $! >"$PIDFILE"
  fi
  local deadline=$((SECONDS + 60))
  until ready; do
    find_pid >/dev/null || die "hydra exited; last log lines:
$(tail -15 "$LOG" 2>/dev/null)"
    ((SECONDS < deadline)) || die "timed out waiting for hydra (log: $LOG)"
    sleep 0.3
  done
  find_pid >"$PIDFILE"
  print_env
}

cmd_down() {
  local pid
  pid="$(find_pid)" || { log "not running"; rm -f "$PIDFILE"; return 0; }
  log "hydra: stopping (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
}

cmd_status() {
  local pid
  if pid="$(find_pid)"; then echo "hydra $HYDRA_VERSION    running (pid $pid)"; else echo "hydra $HYDRA_VERSION    stopped"; fi
  echo "issuer: $ISSUER (CA $PKI/ca.crt), admin: $ADMIN_URL, log: $LOG"
  [[ -n "${pid:-}" ]]
}

# one idp.sh at a time per cache dir (parallel test workers may all call `up`)
lock() {
  mkdir -p "$CACHE_DIR"
  exec 9>"$CACHE_DIR/idp.lock"
  command -v flock >/dev/null 2>&1 && flock 9
  return 0
}

case "${1:-}" in
  build|up|down) lock ;;
esac
case "${1:-}" in
  build) cmd_build ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  built) built ;;
  *) echo "usage: $0 {build|up|down|status|built}" >&2; exit 2 ;;
esac
