#!/usr/bin/env bash
# Local Kubernetes GPU cluster for tests and the demo, built from Go modules and run as local
# processes: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (fake GPU nodes
# and pod lifecycles), Kueue, Volcano, KubeRay and the training operators (JobSet, Kubeflow
# Trainer, LeaderWorkerSet: operators.sh).  See README.md next to this file.
#
#   cluster.sh probe    check the Go module proxy serves every pinned module version
#   cluster.sh build    build the missing binaries into ~/.cache/gpuplatform/bin
#   cluster.sh up       probe + build if needed, start everything, wait until ready (idempotent)
#   cluster.sh down     stop every process this script started
#   cluster.sh status   show processes, ports and nodes
#   cluster.sh up --json / status --json   the same facts as one JSON object (for programs)
#   cluster.sh built    exit 0 when every binary is already built (nothing else)
#   cluster.sh reset    down, then delete the cluster state (etcd data, certs); binaries stay
#   cluster.sh restart-apiserver   stop kube-apiserver and start it again (a fault the soak injects)
#   cluster.sh stop-prometheus / start-prometheus   take the local Prometheus away and back (a fault)
#
# With the cluster run its GPU telemetry (see "GPU telemetry" below): gpu-exporter, serving
# dcgm-exporter's metrics for the fake GPU nodes, and a Prometheus scraping it.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MODULES="$HERE/modules"
CONFIG="$HERE/config"

# ---- profile: which cluster (deploy/stack/profiles.py) ------------------------------------------
# GPUPLATFORM_PROFILE (default: the tests' cluster) names the cluster's state directory and
# port offset; GPUPLATFORM_CLUSTER_DIR and GPUPLATFORM_CLUSTER_PORT_OFFSET, when set, override
# them (a cluster of one's own beside the others).
profile_env=$(cd "$ROOT" && python3 -E -m deploy.stack.profiles env "${GPUPLATFORM_PROFILE:-test}") || exit 2
while IFS='=' read -r name value; do
  [[ -n ${!name:-} ]] || export "$name=$value"
done <<<"$profile_env"

OFFSET="$GPUPLATFORM_CLUSTER_PORT_OFFSET"

# ---- components: deploy/stack/components/ ---------------------------------------------------------
# Each component's module, version, build (wrapper module, packages, tags, ldflags), binaries
# (<BINARY>_BIN: cached by version) and ports (<COMPONENT>_<ROLE>_PORT, all on 127.0.0.1, shifted
# by the profile's OFFSET so that clusters with their own state directories run side by side):
# KUBERNETES_VERSION, KUBERNETES_APISERVER_PORT, KUBECTL_BIN, ... (deploy/stack/component.py env).
components() { (cd "$ROOT" && python3 -E -m deploy.stack.components "$@" --offset "$OFFSET"); }
components_env=$(components env-all) || exit 2
while IFS= read -r line; do declare "${line?}"; done <<<"$components_env"
# The components this script builds and runs, in build order (KEDA: keda.sh).
CLUSTER_COMPONENTS="kubernetes etcd kwok kueue volcano kuberay jobset trainer lws prometheus gpu-exporter"

CACHE_DIR="${GPUPLATFORM_CACHE_DIR:-$HOME/.cache/gpuplatform}"
BIN_DIR="$CACHE_DIR/bin"
# KEDA (keda.sh) is the longest build after Kubernetes's, and only the GPU-autoscaling tests
# need it. GPUPLATFORM_KEDA=later (make test sets it): `build` leaves it out and `up` starts it
# only once it is built; `keda.sh up` builds and starts it. Default: built and started with the rest.
KEDA_WHEN="${GPUPLATFORM_KEDA:-now}"
CLUSTER_DIR="$GPUPLATFORM_CLUSTER_DIR"
PKI="$CLUSTER_DIR/pki"
LOGS="$CLUSTER_DIR/logs"
PIDS="$CLUSTER_DIR/pids"
KUBECONFIG_PATH="$CLUSTER_DIR/kubeconfig"

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[cluster] ERROR: %s\n' "$*" >&2; exit 1; }

# bin <binary>: its cached path (<BINARY>_BIN of its component)
bin() { component_var "$1" BIN; }

# component_var <component|binary> <FIELD>: a declared fact, e.g. `component_var kueue VERSION`
# is $KUEUE_VERSION, `component_var kube-apiserver PACKAGE` is $KUBE_APISERVER_PACKAGE.
component_var() {
  local name="${1^^}_$2"; name="${name//-/_}"
  [[ -v "$name" ]] || die "no component or binary $1 declares $2 (deploy/stack/components/)"
  echo "${!name}"
}

kubectl_() { "$(bin kubectl)" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

require_go() {
  command -v go >/dev/null 2>&1 || die "go is not on PATH (Go >= 1.26 is needed to build the cluster)"
}

# ================================ probe ==========================================================
# Every component's module@version (and the other modules it requires at a version of its
# own) must be served; each wrapper module's full graph is checked too.
cmd_probe() {
  require_go
  local c pin out mod
  for c in $CLUSTER_COMPONENTS; do
    for pin in $(component_var "$c" PINS); do
      if ! out=$(cd "${TMPDIR:-/tmp}" && go list -m -json "$pin" 2>&1 >/dev/null); then
        die "probe: the Go module proxy does not serve $pin: $(echo "$out" | grep -v '^\s*$' | head -1)"
      fi
    done
  done
  for c in $CLUSTER_COMPONENTS; do
    mod="$(component_var "$c" WRAPPER)"
    log "probe: downloading the module graph of $mod"
    if ! out=$(cd "$ROOT/$mod" && go mod download 2>&1); then
      die "probe: $mod: $(echo "$out" | grep -E 'go: |error|403|404|not available' | head -1)"
    fi
  done
  log "probe: ok (every pinned module version is served)"
}

# ================================ build ==========================================================
component_built() { # component_built <component>: every binary of it is cached
  local binary
  for binary in $(component_var "$1" BINARIES); do [[ -x "$(bin "$binary")" ]] || return 1; done
}

# build_component <component>: `go build` of each of its packages in its wrapper module, with
# its tags and ldflags, into its cached path; nothing when every one is cached.
build_component() {
  local c="$1" binary exe dir
  if component_built "$c"; then log "build: $c is cached"; return 0; fi
  dir="$ROOT/$(component_var "$c" WRAPPER)"
  [[ $c != volcano ]] || dir="$(prepare_volcano_build)"
  mkdir -p "$BIN_DIR" "$CACHE_DIR/build-logs"
  local blog="$CACHE_DIR/build-logs/$c.log" start=$SECONDS
  log "build: $c $(component_var "$c" VERSION) (go build; this takes minutes on a cold cache; log: $blog)"
  : >"$blog"
  for binary in $(component_var "$c" BINARIES); do
    exe="$(bin "$binary")"
    if ! (cd "$dir" && go build -buildvcs=false -p "${GPUPLATFORM_BUILD_P:-2}" -tags "$(component_var "$c" TAGS)" \
        -ldflags "$(component_var "$c" LDFLAGS)" -o "$exe.tmp" "$(component_var "$binary" PACKAGE)") >>"$blog" 2>&1; then
      tail -20 "$blog" >&2
      rm -f "$exe.tmp"
      die "build: $c failed (see $blog)"
    fi
    mv -f "$exe.tmp" "$exe"
  done
  log "build: $c done in $((SECONDS - start))s"
}

# Volcano's go.mod replaces volcano.sh/apis with ./staging/src/volcano.sh/apis, which is not in
# the module zip, and the proxy serves no volcano.sh/apis v1.15.x. So the Volcano build happens in
# $CACHE_DIR/src/volcano-<version>: our wrapper go.mod/go.sum, plus a copy of volcano.sh/apis
# (VOLCANO_APIS_PIN, v1.14.0) from the module cache with one file of ours (modules/volcano/apis-compat)
# declaring the one identifier v1.15.1 needs that v1.14.0 lacks; go.mod replaces volcano.sh/apis with it.
prepare_volcano_build() {
  local dir="$CACHE_DIR/src/volcano-$VOLCANO_VERSION" apis
  apis="$(cd "$MODULES/volcano" && go mod download -json "$VOLCANO_APIS_PIN" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')" \
    || die "build: cannot download $VOLCANO_APIS_PIN"
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$MODULES/volcano/go.mod" "$MODULES/volcano/go.sum" "$dir/"
  cp -r "$apis" "$dir/apis" && chmod -R u+w "$dir/apis"
  cp "$MODULES/volcano/apis-compat/scheduling_v1beta1.go.in" \
    "$dir/apis/pkg/apis/scheduling/v1beta1/zz_gpuplatform_compat.go"
  (cd "$dir" && go mod edit -replace "volcano.sh/apis=./apis")
  echo "$dir"
}

keda_left_out() { [[ $KEDA_WHEN == later ]] && ! "$HERE/keda.sh" built; }

all_built() {
  local c
  for c in $CLUSTER_COMPONENTS; do component_built "$c" || return 1; done
}

cmd_build() {
  if all_built; then log "build: every binary is cached in $BIN_DIR"; else build_cluster; fi
  [[ $KEDA_WHEN == later ]] || "$HERE/keda.sh" build  # KEDA (inference autoscaling on GPU utilization)
}

build_cluster() {
  require_go
  local c
  for c in $CLUSTER_COMPONENTS; do build_component "$c"; done
  log "build: all binaries in $BIN_DIR"
}

# ================================ certificates ===================================================
ensure_openssl() {
  command -v openssl >/dev/null 2>&1 && return 0
  log "openssl missing: apt-get install -y openssl"
  apt-get install -y openssl >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y openssl >/dev/null; }
}

# sign <name> <subject> <extensions>
sign() {
  local name="$1" subj="$2" ext="$3"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subj" \
    -out "$PKI/$name.csr" 2>/dev/null
  printf '%s\n' "$ext" >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

ensure_pki() {
  [[ -s "$PKI/kueue-metrics/tls.crt" && -s "$KUBECONFIG_PATH" ]] && return 0
  ensure_openssl
  log "certificates: creating a local CA and certificates in $PKI"
  mkdir -p "$PKI/kueue-webhook"
  chmod 700 "$PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 \
    -subj "/CN=gpuplatform-local-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1"
  sign admin "/O=system:masters/CN=gpuplatform-admin" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  sign kueue-webhook/tls "/CN=kueue-webhook" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
  mkdir -p "$PKI/kueue-metrics"
  sign kueue-metrics/tls "/CN=kueue-metrics" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  local b64="base64 -w0"
  cat >"$KUBECONFIG_PATH" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpuplatform-local
  cluster:
    server: https://127.0.0.1:$KUBERNETES_APISERVER_PORT
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: gpuplatform-admin
  user:
    client-certificate-data: $($b64 <"$PKI/admin.crt")
    client-key-data: $($b64 <"$PKI/admin.key")
contexts:
- name: gpuplatform-local
  context:
    cluster: gpuplatform-local
    user: gpuplatform-admin
current-context: gpuplatform-local
EOF
  chmod 600 "$KUBECONFIG_PATH"
}

# The kubelet side of container logs: kwok serves them with a certificate of our CA for
# 127.0.0.1 (the fake nodes' address), and the API server's kubelet client presents its own.
# Separate from ensure_pki so that a cluster made before logs existed gets them too.
ensure_kubelet_pki() {
  [[ -s "$PKI/kwok-kubelet.crt" && -s "$PKI/apiserver-kubelet-client.crt" ]] && return 0
  ensure_openssl
  log "certificates: kwok's kubelet server and the API server's kubelet client"
  sign kwok-kubelet "/CN=kwok-kubelet" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
  sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
}

# Kueue's visibility API (the pending workloads of a queue, in its order) is served by Kueue on
# 127.0.0.1 and reached through the API server's aggregation layer, which presents its own
# client certificate (front-proxy-client, trusted by the requestheader flags) and checks
# Kueue's serving certificate for the name <service>.<namespace>.svc. Kueue reads that
# certificate from a path fixed for the whole machine (/visibility), so every local cluster of
# this cache shares one, made once in $VISIBILITY_PKI with a CA of its own that each cluster's
# APIService trusts. Separate from ensure_pki so that an older cluster gets them too.
VISIBILITY_PKI="$CACHE_DIR/kueue-visibility"
ensure_visibility_pki() {
  if [[ ! -s "$VISIBILITY_PKI/tls.crt" ]]; then
    ensure_openssl
    log "certificates: Kueue's visibility server, one for every local cluster ($VISIBILITY_PKI)"
    mkdir -p "$VISIBILITY_PKI" && chmod 700 "$VISIBILITY_PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$VISIBILITY_PKI/ca.key" -out "$VISIBILITY_PKI/ca.crt" \
      -days 3650 -subj "/CN=gpuplatform-kueue-visibility-ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    PKI="$VISIBILITY_PKI" sign tls "/CN=kueue-visibility-server" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:kueue-visibility-server.kueue-system.svc,DNS:localhost,IP:127.0.0.1"
  fi
  [[ -s "$PKI/front-proxy-client.crt" ]] && return 0
  ensure_openssl
  log "certificates: the API server's aggregator client"
  sign front-proxy-client "/CN=front-proxy-client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
}

# ================================ GPU telemetry ==================================================
# What NVIDIA's dcgm-exporter and the user's Prometheus are in production, for the fake nodes:
# gpu-exporter (modules/gpu-exporter, ours) watches nodes and pods and serves dcgm-exporter's
# metrics per fake GPU, steered by the pods' GPU_SIM_UTIL / GPU_SIM_MEM_MIB env; Prometheus
# (built from its Go module, cmd/prometheus only, without the web UI's assets and without
# service discovery plugins: static targets are all it needs) scrapes it every few seconds.
# Both are fixtures of this cluster, never of the image or the chart.
PROMETHEUS_SCRAPE_SECONDS="${GPUPLATFORM_PROMETHEUS_SCRAPE_SECONDS:-5}"
PROMETHEUS_URL_="http://127.0.0.1:$PROMETHEUS_HTTP_PORT"

# Exporters of this cluster built from older sources (another hash), still running.
stale_gpu_exporters() {
  local p argv0 current; current="$(bin gpu-exporter)"
  for p in /proc/[0-9]*; do
    { IFS= read -r -d '' argv0 <"$p/cmdline"; } 2>/dev/null || continue
    [[ "$argv0" == "$BIN_DIR/gpu-exporter-"* && "$argv0" != "$current" ]] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$CLUSTER_DIR/" && echo "${p#/proc/}"
  done
  return 0
}

stop_stale_gpu_exporters() {
  local pid _
  for pid in $(stale_gpu_exporters); do
    log "gpu-exporter: stopping one built from older sources (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
  done
  for _ in $(seq 1 20); do [[ -z "$(stale_gpu_exporters)" ]] && return 0; sleep 0.25; done
  for pid in $(stale_gpu_exporters); do kill -KILL "$pid" 2>/dev/null || true; done
}

write_prometheus_config() {
  cat >"$CLUSTER_DIR/prometheus.yml.new" <<PROMETHEUS_YML
# Written by cluster.sh: scrape the local cluster's dcgm-format exporter.
global:
  scrape_interval: ${PROMETHEUS_SCRAPE_SECONDS}s
  scrape_timeout: ${PROMETHEUS_SCRAPE_SECONDS}s
  evaluation_interval: ${PROMETHEUS_SCRAPE_SECONDS}s
scrape_configs:
- job_name: dcgm-exporter
  # Keep the exporter's namespace/pod/container labels (those of the GPU's pod), as the
  # ServiceMonitor of docs/telemetry.md does.
  honor_labels: true
  static_configs:
  - targets: ["127.0.0.1:$GPU_EXPORTER_HTTP_PORT"]
PROMETHEUS_YML
}

start_telemetry() {
  local c
  for c in prometheus gpu-exporter; do component_built "$c" || { require_go; build_component "$c"; }; done
  stop_stale_gpu_exporters
  run_declared start_current gpu-exporter
  wait_for "gpu-exporter" 60 components ready gpu-exporter
  write_prometheus_config
  # Prometheus reads its configuration at start: one running with another is started anew.
  if ! cmp -s "$CLUSTER_DIR/prometheus.yml.new" "$CLUSTER_DIR/prometheus.yml" && is_running prometheus; then
    log "prometheus: its configuration changed, restarting it"
    stop_group prometheus
    rm -f "$PIDS/prometheus.pid"
  fi
  mv -f "$CLUSTER_DIR/prometheus.yml.new" "$CLUSTER_DIR/prometheus.yml"
  run_declared start_current prometheus
  local deadline=$((SECONDS + 60))
  until components ready prometheus; do
    alive_or_die prometheus
    ((SECONDS < deadline)) || die "timed out waiting for Prometheus (log: $LOGS/prometheus.log)"
    sleep 0.5
  done
}

stop_telemetry() {
  stop_group prometheus gpu-exporter
  stop_stale_gpu_exporters
}

# Prometheus goes away (a fault tests inject: pages must say so, reclaim must pause) and
# comes back with the same data.
cmd_stop_prometheus() { stop_group prometheus; rm -f "$PIDS/prometheus.pid"; }
cmd_start_prometheus() { mkdir -p "$LOGS" "$PIDS"; start_telemetry; }

# ================================ processes ======================================================
# The processes of this cluster: our binary for <name>, with this cluster's directory in its
# arguments. Pid files are only a cache of this (they can go stale or be lost).
find_pids() { # find_pids <name>
  local exe p cmd argv0
  exe="$(bin "$1")"
  for p in /proc/[0-9]*; do
    { IFS= read -r -d '' argv0 <"$p/cmdline"; } 2>/dev/null || continue
    [[ "$argv0" == "$exe" ]] || continue
    cmd="$( { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null )" || continue
    [[ "$cmd" == "$exe "* && "$cmd" == *"$CLUSTER_DIR/"* ]] && echo "${p#/proc/}"
  done
  return 0
}

is_running() { # is_running <name>; refreshes pids/<name>.pid
  local pid
  pid="$(find_pids "$1" | head -1)"
  [[ -n "$pid" ]] || return 1
  mkdir -p "$PIDS" && echo "$pid" >"$PIDS/$1.pid"
}

start() { # start <name> <binary> args...
  local name="$1"; shift
  if is_running "$name"; then return 0; fi  # already running
  log "$name: starting"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 8>&- 9>&- &  # 8, 9: the locks, not for the children
  echo $! >"$PIDS/$name.pid"
}

# run_declared <start|start_current> <binary>: start it with the arguments its component
# declares for this cluster (deploy/stack/components/, `Component.arguments`).
run_declared() {
  local how="$1" binary="$2" text
  local -a args
  text="$(components args "$binary" --cluster-dir "$CLUSTER_DIR" --config-dir "$CONFIG")" \
    || die "no arguments declared for $binary (deploy/stack/components/)"
  mapfile -t args <<<"$text"
  "$how" "$binary" "$(bin "$binary")" "${args[@]}"
}

# start_current <name> <binary> args...: as start, but a process of ours running with other
# arguments (a cluster started before this script changed them) is stopped and started anew.
start_current() {
  local name="$1" pid want have
  pid="$(find_pids "$name" | head -1)"
  if [[ -n "$pid" ]]; then
    want="$(printf '%s\0' "${@:2}" | tr '\0' '\1')"
    have="$(tr '\0' '\1' <"/proc/$pid/cmdline" 2>/dev/null)" || have=""
    if [[ "$have" != "$want" ]]; then
      log "$name: its arguments changed, restarting it"
      stop_group "$name"
      rm -f "$PIDS/$name.pid"
    fi
  fi
  start "$@"
}

# wait_for <what> <seconds> <command...>
wait_for() {
  local what="$1" timeout="$2"; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then die "timed out after ${timeout}s waiting for $what (logs: $LOGS)"; fi
    sleep 0.5
  done
}

alive_or_die() { # alive_or_die <name>
  is_running "$1" || die "$1 exited; last log lines:
$(tail -15 "$LOGS/$1.log" 2>/dev/null)"
}

# url_check <url> <2xx|any> [ca|-] [client-cert] [client-key]: python3 stdlib, no curl needed.
# 2xx: the answer must be a success; any: any HTTP answer (e.g. a TLS server that is up).
# With "-" as ca the server certificate is not verified (self-signed component health ports).
url_check() {
  python3 - "$@" <<'PY' >/dev/null 2>&1
import ssl, sys, urllib.error, urllib.request
url, expect = sys.argv[1], sys.argv[2]
ca = sys.argv[3] if len(sys.argv) > 3 else None
context = None
if url.startswith("https"):
    context = ssl.create_default_context(cafile=None if ca in (None, "-") else ca)
    if ca in (None, "-"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if len(sys.argv) > 5:
        context.load_cert_chain(sys.argv[4], sys.argv[5])
try:
    urllib.request.urlopen(url, timeout=2, context=context)
except urllib.error.HTTPError:
    sys.exit(0 if expect == "any" else 1)
PY
}
apiserver_ready() { "$(bin kubectl)" --kubeconfig "$KUBECONFIG_PATH" get --raw /readyz --request-timeout=3s; }
secure_health() { # secure_health <port> <path>: health endpoints of components (admin client cert)
  url_check "https://127.0.0.1:$1$2" 2xx - "$PKI/admin.crt" "$PKI/admin.key"
}

start_etcd() {
  run_declared start etcd
  wait_for "etcd" 60 components ready etcd
}

# Structured authentication configuration: no JWT issuer until someone writes one in. The
# apiserver watches the file and reloads it when it changes (the SSO test writes the local
# IdP's issuer into it, tests/live/sso/test_cluster_identity.py); an existing file is kept.
AUTHN_CONFIG="$CLUSTER_DIR/authentication-config.yaml"
ensure_authn_config() {
  [[ -s "$AUTHN_CONFIG" ]] && return 0
  printf '%s\n' "apiVersion: apiserver.config.k8s.io/v1" "kind: AuthenticationConfiguration" "jwt: []" >"$AUTHN_CONFIG"
}

start_apiserver() {
  ensure_authn_config
  ensure_kubelet_pki
  ensure_visibility_pki
  run_declared start_current kube-apiserver
  local deadline=$((SECONDS + 120))
  until apiserver_ready >/dev/null 2>&1; do
    alive_or_die kube-apiserver
    ((SECONDS < deadline)) || die "timed out waiting for kube-apiserver /readyz (log: $LOGS/kube-apiserver.log)"
    sleep 0.5
  done
}

start_controllers() {
  run_declared start kube-controller-manager
  run_declared start kube-scheduler
  # kwok also serves what a kubelet serves for its fake nodes (container logs, config/kwok-logs.yaml)
  # on 127.0.0.1:KWOK_KUBELET_PORT, the address and port its node stages write into every fake
  # node, with a certificate of our CA; the API server's kubelet client checks it.
  sed -e "s|@FAKE_LOGS@|$CONFIG/fake-logs|g" "$CONFIG/kwok-logs.yaml" >"$CLUSTER_DIR/kwok-logs.yaml"
  run_declared start_current kwok
}

apply_crds() {
  local modcache; modcache="$(gomodcache_or_die)"
  local kueue_crds="$modcache/sigs.k8s.io/kueue@$KUEUE_VERSION/config/components/crd/bases"
  local vc="$modcache/volcano.sh/volcano@$VOLCANO_VERSION/config/crd"
  if [[ ! -d "$kueue_crds" || ! -d "$vc" ]]; then # binaries cached but module cache cleaned
    require_go
    (cd "$MODULES/kueue" && go mod download "sigs.k8s.io/kueue@$KUEUE_VERSION")
    (cd "$MODULES/volcano" && go mod download "volcano.sh/volcano@$VOLCANO_VERSION")
  fi
  local marker="$CLUSTER_DIR/crds-applied-kueue-$KUEUE_VERSION-volcano-$VOLCANO_VERSION"
  if [[ -f "$marker" ]] && kubectl_ get crd workloads.kueue.x-k8s.io jobs.batch.volcano.sh >/dev/null 2>&1; then
    :  # already applied
  else
    log "CRDs: Kueue $KUEUE_VERSION and Volcano $VOLCANO_VERSION (server-side apply)"
    kubectl_ apply --server-side --force-conflicts -f "$kueue_crds" -f "$vc/volcano/bases" -f "$vc/jobflow/bases" >/dev/null
    kubectl_ wait --for condition=Established --timeout 60s crd --all >/dev/null
    touch "$marker"
  fi
  apply_kuberay_crds "$modcache"
  apply_training_crds  # operators.sh; before Kueue starts: its integrations need them
  kubectl_ apply --server-side --force-conflicts -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: kueue-system
---
apiVersion: v1
kind: Namespace
metadata:
  name: volcano-system
EOF
}

# KubeRay's CRDs from its module (RayCluster, RayJob, RayService; not RayCronJob, which the
# platform does not render). Before Kueue starts: its ray.io integrations need them.
apply_kuberay_crds() {
  local crds="$1/github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION/config/crd/bases"
  if [[ ! -d "$crds" ]]; then
    require_go
    (cd "$MODULES/kuberay" && go mod download "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION")
  fi
  local marker="$CLUSTER_DIR/crds-applied-kuberay-$KUBERAY_VERSION"
  if [[ -f "$marker" ]] && kubectl_ get crd rayjobs.ray.io rayclusters.ray.io rayservices.ray.io >/dev/null 2>&1; then
    return 0
  fi
  log "CRDs: KubeRay $KUBERAY_VERSION (server-side apply)"
  kubectl_ apply --server-side --force-conflicts -f "$crds/ray.io_rayclusters.yaml" -f "$crds/ray.io_rayjobs.yaml" \
    -f "$crds/ray.io_rayservices.yaml" >/dev/null
  # (a CRD just created has no conditions yet, which `kubectl wait` takes for an error: retried)
  wait_for "KubeRay's CRDs" 60 kubectl_ wait --for condition=Established --timeout 5s \
    crd rayjobs.ray.io rayclusters.ray.io rayservices.ray.io
  touch "$marker"
}

# The KubeRay operator: every namespace, no leader election (one replica), no webhooks (its
# own are optional and off by default). Kueue suspends and admits Ray objects; KubeRay makes
# their pods once admitted.
start_kuberay() {
  KUBECONFIG="$KUBECONFIG_PATH" run_declared start_current kuberay-operator
  wait_for "KubeRay operator health" 90 components ready kuberay
}

# The admission policy that guards team namespaces and its binding, from the file the Helm
# chart installs them from (rendered from tenants/admission.py by `manage.py team_policy
# --write`), applied as the cluster admin: the platform's identity never writes admission
# policies. Every `up` applies it, so a changed policy reaches a running cluster at its next `up`.
TEAM_POLICY="$HERE/../helm/gpuplatform/files/team-workloads.yaml"
apply_team_policy() {
  kubectl_ apply --server-side --force-conflicts --field-manager gpuplatform-install -f "$TEAM_POLICY" >/dev/null
}

gomodcache_or_die() {
  if command -v go >/dev/null 2>&1; then go env GOMODCACHE; else echo "${GOMODCACHE:-$HOME/go/pkg/mod}"; fi
}

apply_nodes() {
  log "nodes: applying fake GPU nodes"
  kubectl_ apply --server-side --force-conflicts -f "$CONFIG/nodes.yaml" >/dev/null
  # A Node's status is a subresource: on a running cluster, new capacity (e.g. rdma/hca) reaches
  # the nodes only through it.
  kubectl_ apply --server-side --force-conflicts --subresource=status -f "$CONFIG/nodes.yaml" >/dev/null
  local n; n="$(grep -c '^kind: Node' "$CONFIG/nodes.yaml")"
  wait_for "$n Ready kwok nodes" 90 nodes_ready "$n"
}
nodes_ready() {
  local ready
  ready="$(kubectl_ get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')"
  [[ "$ready" -ge "$1" ]]
}

# Kueue (with internalCertManagement disabled) reads its metrics serving certificate from the
# fixed path /etc/kueue/metrics/certs (not configurable in cmd/kueue). Put a certificate signed
# by our CA there once; it only serves Kueue's metrics endpoint on 127.0.0.1.
KUEUE_METRICS_CERTS=/etc/kueue/metrics/certs
ensure_kueue_metrics_cert() {
  [[ -s "$KUEUE_METRICS_CERTS/tls.crt" && -s "$KUEUE_METRICS_CERTS/tls.key" ]] && return 0
  { mkdir -p "$KUEUE_METRICS_CERTS" 2>/dev/null && [[ -w "$KUEUE_METRICS_CERTS" ]]; } \
    || die "Kueue needs a certificate in $KUEUE_METRICS_CERTS (hard-coded in cmd/kueue); run once as root: mkdir -p $KUEUE_METRICS_CERTS && cp $PKI/kueue-metrics/tls.* $KUEUE_METRICS_CERTS/"
  cp "$PKI/kueue-metrics/tls.crt" "$PKI/kueue-metrics/tls.key" "$KUEUE_METRICS_CERTS/"
}

# With internalCertManagement disabled Kueue reads its visibility server's certificate from
# the fixed path /visibility (pkg/visibility/server.go): the shared one, copied when it differs.
KUEUE_VISIBILITY_CERTS=/visibility
ensure_kueue_visibility_cert() {
  local f
  for f in tls.crt tls.key; do
    cmp -s "$VISIBILITY_PKI/$f" "$KUEUE_VISIBILITY_CERTS/$f" && continue
    { mkdir -p "$KUEUE_VISIBILITY_CERTS" 2>/dev/null && [[ -w "$KUEUE_VISIBILITY_CERTS" ]]; } \
      || die "Kueue needs its visibility certificate in $KUEUE_VISIBILITY_CERTS (hard-coded in Kueue); run once as root: mkdir -p $KUEUE_VISIBILITY_CERTS && cp $VISIBILITY_PKI/tls.* $KUEUE_VISIBILITY_CERTS/"
    cp "$VISIBILITY_PKI/$f" "$KUEUE_VISIBILITY_CERTS/$f"
  done
}

start_kueue() {
  ensure_kueue_metrics_cert
  ensure_kueue_visibility_cert
  sed -e "s|@WEBHOOK_PORT@|$KUEUE_WEBHOOK_PORT|; s|@HEALTH_PORT@|$KUEUE_HEALTH_PORT|" \
      -e "s|@METRICS_PORT@|$KUEUE_METRICS_PORT|; s|@CERT_DIR@|$PKI/kueue-webhook|" \
      -e "s|@VISIBILITY_PORT@|$KUEUE_VISIBILITY_PORT|" \
      "$CONFIG/kueue-config.yaml" >"$CLUSTER_DIR/kueue-config.yaml.new"
  # Kueue reads its configuration at start: one running with another is started anew.
  if ! cmp -s "$CLUSTER_DIR/kueue-config.yaml.new" "$CLUSTER_DIR/kueue-config.yaml" && is_running kueue; then
    log "kueue: its configuration changed, restarting it"
    stop_group kueue
    rm -f "$PIDS/kueue.pid"
  fi
  mv -f "$CLUSTER_DIR/kueue-config.yaml.new" "$CLUSTER_DIR/kueue-config.yaml"
  KUBECONFIG="$KUBECONFIG_PATH" run_declared start kueue
  local deadline=$((SECONDS + 120))
  until kueue_ready; do
    alive_or_die kueue
    ((SECONDS < deadline)) || die "timed out waiting for Kueue readiness (log: $LOGS/kueue.log)"
    sleep 0.5
  done
  apply_kueue_webhooks
  apply_kueue_visibility
}

# The aggregation layer's way to Kueue's visibility API: an APIService for
# visibility.kueue.x-k8s.io/v1beta2 whose Service is an ExternalName for 127.0.0.1 (the API
# server dials an ExternalName service's name and the APIService's port), checked with the
# visibility CA (ensure_visibility_pki).
# Without it the platform counts queue positions itself (jobs/queue/queueing.py): a warning, not a failure.
apply_kueue_visibility() {
  log "Kueue: visibility API through the aggregator (https://127.0.0.1:$KUEUE_VISIBILITY_PORT)"
  kubectl_ apply --server-side --force-conflicts -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata:
  name: kueue-visibility-server
  namespace: kueue-system
  labels: {app.kubernetes.io/part-of: gpuplatform-local-cluster}
spec:
  type: ExternalName
  externalName: 127.0.0.1
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta2.visibility.kueue.x-k8s.io
  labels: {app.kubernetes.io/part-of: gpuplatform-local-cluster}
spec:
  group: visibility.kueue.x-k8s.io
  version: v1beta2
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: $(base64 -w0 <"$VISIBILITY_PKI/ca.crt")
  service:
    name: kueue-visibility-server
    namespace: kueue-system
    port: $KUEUE_VISIBILITY_PORT
EOF
  local deadline=$((SECONDS + 60))
  until kubectl_ get --raw /apis/visibility.kueue.x-k8s.io/v1beta2 >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "WARNING: Kueue's visibility API does not answer through the aggregator (log: $LOGS/kueue.log); queue positions are counted by the platform"
      return 0
    fi
    sleep 0.5
  done
}

kueue_ready() { # readyz answers and the webhook server completes a TLS handshake with our CA
  components ready kueue || return 1
  url_check "https://127.0.0.1:$KUEUE_WEBHOOK_PORT/" any "$PKI/ca.crt"
}

# Kueue's webhook definitions of the same version, pointed at https://127.0.0.1:<port>/... with
# our CA; only the webhooks of the integrations we enable (Kueue objects, batch Job, Pod,
# Deployment, StatefulSet, RayJob, RayCluster, JobSet, TrainJob, LeaderWorkerSet) are kept.
apply_kueue_webhooks() {
  local src; src="$(gomodcache_or_die)/sigs.k8s.io/kueue@$KUEUE_VERSION/config/components/webhook/manifests.yaml"
  log "Kueue: applying webhook configurations (url: https://127.0.0.1:$KUEUE_WEBHOOK_PORT)"
  kubectl_ create --dry-run=client -o json -f "$src" \
    | python3 -c '
import base64, json, sys
port, ca_path = sys.argv[1], sys.argv[2]
ca = base64.b64encode(open(ca_path, "rb").read()).decode()
keep = ("-kueue-x-k8s-io-", "-batch-v1-job", "--v1-pod", "-apps-v1-deployment",
        "-apps-v1-statefulset", "-ray-io-v1-rayjob", "-ray-io-v1-raycluster",
        "-jobset-x-k8s-io-", "-trainer-kubeflow-org-", "-leaderworkerset-x-k8s-io-")
system_ns = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                   "values": ["kube-system", "kueue-system", "volcano-system"]}]}
text, items, pos = sys.stdin.read(), [], 0
decoder = json.JSONDecoder()
while pos < len(text):  # kubectl prints one JSON document per input object
    if text[pos].isspace():
        pos += 1
        continue
    obj, pos = decoder.raw_decode(text, pos)
    items.extend(obj["items"] if obj.get("kind") == "List" else [obj])
for obj in items:
    obj["metadata"] = {"name": "kueue-" + obj["metadata"]["name"],
                       "labels": {"app.kubernetes.io/part-of": "gpuplatform-local-cluster"}}
    hooks = []
    for hook in obj.get("webhooks", []):
        path = hook["clientConfig"]["service"]["path"]
        if not any(k in path for k in keep):
            continue
        hook["clientConfig"] = {"url": "https://127.0.0.1:%s%s" % (port, path), "caBundle": ca}
        if any(k in path for k in ("--v1-pod", "-apps-v1-deployment", "-apps-v1-statefulset")):
            hook["namespaceSelector"] = system_ns
        hooks.append(hook)
    obj["webhooks"] = hooks
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
' "$KUEUE_WEBHOOK_PORT" "$PKI/ca.crt" \
    | kubectl_ apply --server-side --force-conflicts -f - >/dev/null
}

# The Volcano controller's configuration: HyperNode discovery from the nodes' topology labels
# (config/volcano-controller.conf). Its hyperNode-controller watches the ConfigMap, so a change
# applies without a restart.
apply_volcano_controller_config() {
  "$(bin kubectl)" create configmap volcano-controller-configmap --namespace volcano-system \
    --from-file "volcano-controller.conf=$CONFIG/volcano-controller.conf" --dry-run=client -o yaml \
    | kubectl_ apply --server-side --force-conflicts -f - >/dev/null
}

start_volcano() {
  run_declared start vc-controller-manager
  run_declared start vc-scheduler
  wait_for "Volcano scheduler and controller health" 90 components ready volcano
  apply_volcano_controller_config
  # the scheduler creates the default queue; create it ourselves if it has not after a while
  local deadline=$((SECONDS + 20))
  until kubectl_ get queues.scheduling.volcano.sh default >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "Volcano: creating the default queue"
      kubectl_ apply --server-side -f - >/dev/null <<EOF
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: default
spec:
  weight: 1
  reclaimable: true
EOF
      break
    fi
    sleep 0.5
  done
}

cmd_up() {
  local t0=$SECONDS
  mkdir -p "$CLUSTER_DIR" "$LOGS" "$PIDS"
  if ! all_built; then cmd_probe; cmd_build; fi
  ensure_pki
  start_etcd
  start_apiserver
  start_controllers
  apply_crds
  apply_team_policy
  apply_nodes
  start_kueue
  start_volcano
  start_kuberay
  start_training_operators  # operators.sh
  wait_for "the default ServiceAccount" 60 kubectl_ get serviceaccount default -n default
  for c in kube-controller-manager kube-scheduler kwok kueue vc-scheduler vc-controller-manager kuberay-operator; do
    alive_or_die "$c"
  done
  wait_for "kube-controller-manager health" 60 secure_health "$KUBERNETES_CONTROLLER_MANAGER_PORT" /healthz
  wait_for "kube-scheduler health" 60 secure_health "$KUBERNETES_SCHEDULER_PORT" /healthz
  start_telemetry
  if keda_left_out; then
    log "KEDA: not built yet, left out (GPUPLATFORM_KEDA=later); keda.sh up builds and starts it"
  else
    "$HERE/keda.sh" up
  fi
  log "ready in $((SECONDS - t0))s: $(kubectl_ version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])'), $(kubectl_ get nodes --no-headers | wc -l) nodes"
  if ((JSON)); then json_of "${CLUSTER_FACTS[@]}"; return; fi
  echo "export KUBECONFIG=$KUBECONFIG_PATH"
  echo "export PROMETHEUS_URL=$PROMETHEUS_URL_"
}

# ---- --json: what the fixtures, the soak and the demo read (the default output is for people) ----
# The cluster's facts, as `key=value` for json_of (a dotted key nests).
CLUSTER_FACTS=(
  "kubeconfig=$KUBECONFIG_PATH" "prometheus_url=$PROMETHEUS_URL_" "cluster_dir=$CLUSTER_DIR" "port_offset=$OFFSET"
  "ports.etcd=$ETCD_CLIENT_PORT" "ports.apiserver=$KUBERNETES_APISERVER_PORT" "ports.kueue_webhook=$KUEUE_WEBHOOK_PORT"
  "ports.gpu_exporter=$GPU_EXPORTER_HTTP_PORT" "ports.prometheus=$PROMETHEUS_HTTP_PORT"
)
JSON=0

json_of() { # json_of key=value...: one JSON object; a dotted key nests, digits and true/false are typed
  python3 -E -c '
import json, sys
out = {}
for arg in sys.argv[1:]:
    key, value = arg.split("=", 1)
    *path, last = key.split(".")
    node = out
    for part in path:
        node = node.setdefault(part, {})
    node[last] = int(value) if value.isdigit() else {"true": True, "false": False, "null": None}.get(value, value)
print(json.dumps(out, indent=2))' "$@"
}


stop_group() { # stop_group <name>...: SIGTERM them together, SIGKILL what is left after 10s
  local name pid alive _
  local -a pids=()
  for name in "$@"; do
    for pid in $(find_pids "$name"); do log "$name: stopping (pid $pid)"; pids+=("$pid"); done
  done
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 40); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.25
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

cmd_down() {
  # KEDA, telemetry and controllers first, then the apiserver, then etcd
  "$HERE/keda.sh" down
  stop_telemetry
  stop_training_operators  # operators.sh
  stop_group kuberay-operator vc-scheduler vc-controller-manager kueue kwok kube-scheduler kube-controller-manager
  stop_group kube-apiserver
  stop_group etcd
  rm -f "$PIDS"/*.pid
  log "stopped"
}

# The API server goes away and comes back with the same flags and state (etcd keeps
# everything); clients see refused connections, then watches that must resume or relist.
cmd_restart_apiserver() {
  is_running kube-apiserver || die "kube-apiserver is not running (cluster.sh up first)"
  local t0=$SECONDS
  stop_group kube-apiserver
  rm -f "$PIDS/kube-apiserver.pid"
  start_apiserver
  log "kube-apiserver restarted in $((SECONDS - t0))s"
}

cmd_status() {
  if ((JSON)); then status_json; return; fi
  local name state rc=0
  for name in $STATUS_COMPONENTS; do
    if is_running "$name"; then state="running (pid $(cat "$PIDS/$name.pid"))"; else state="stopped"; rc=1; fi
    printf '%-28s %s\n' "$name" "$state"
  done
  if keda_left_out; then echo "keda: not built yet (GPUPLATFORM_KEDA=later)"; else "$HERE/keda.sh" status || rc=1; fi
  echo "kubeconfig: $KUBECONFIG_PATH"
  echo "ports: etcd $ETCD_CLIENT_PORT, apiserver $KUBERNETES_APISERVER_PORT, kueue webhook $KUEUE_WEBHOOK_PORT (127.0.0.1)"
  echo "GPU metrics: http://127.0.0.1:$GPU_EXPORTER_HTTP_PORT/metrics, Prometheus $PROMETHEUS_URL_ (scrape every ${PROMETHEUS_SCRAPE_SECONDS}s)"
  if [[ $rc == 0 ]]; then kubectl_ get nodes -L gpuplatform.io/pool,nvidia.com/gpu.product || rc=1; fi
  return $rc
}

STATUS_COMPONENTS="etcd kube-apiserver kube-controller-manager kube-scheduler kwok kueue vc-controller-manager \
vc-scheduler kuberay-operator jobset-controller trainer-controller-manager lws-controller gpu-exporter prometheus"

# status --json: the facts, each process's pid (null: stopped), KEDA's state and whether
# everything runs ("running"; the exit status says the same).
status_json() {
  local name keda rc=0
  local -a facts=("${CLUSTER_FACTS[@]}")
  for name in $STATUS_COMPONENTS; do
    if is_running "$name"; then facts+=("pids.$name=$(cat "$PIDS/$name.pid")"); else facts+=("pids.$name=null"); rc=1; fi
  done
  if keda_left_out; then keda=later
  elif "$HERE/keda.sh" status >/dev/null; then keda=running
  else keda=stopped; rc=1
  fi
  facts+=("keda=$keda")
  if [[ $rc == 0 ]]; then facts+=("nodes=$(kubectl_ get nodes --no-headers | wc -l)") || rc=1; fi
  if [[ $rc == 0 ]]; then facts+=(running=true); else facts+=(running=false); fi
  json_of "${facts[@]}"
  return $rc
}

cmd_reset() {
  cmd_down
  log "removing $CLUSTER_DIR"
  rm -rf "$CLUSTER_DIR"
}

# one cluster.sh at a time per cache dir (parallel test workers may all call `up`)
lock() {
  mkdir -p "$CACHE_DIR"
  exec 9>"$CACHE_DIR/cluster.lock"
  command -v flock >/dev/null 2>&1 || return 0
  flock -n 9 && return 0
  log "waiting for another cluster.sh run to finish (a build? logs: $CACHE_DIR/build-logs)"
  flock 9
}

# The training operators (JobSet, Trainer, LeaderWorkerSet): their CRDs, webhooks and start.
# shellcheck source-path=SCRIPTDIR source=operators.sh
source "$HERE/operators.sh"

# Sourced (keda.sh takes its helpers from here): define, run nothing.
[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0

case "${1:-}" in
  probe|build|up|down|reset|restart-apiserver|stop-prometheus|start-prometheus) lock ;;
esac
[[ "${2:-}" == --json ]] && JSON=1  # up and status: one JSON object on stdout instead
case "${1:-}" in
  probe) cmd_probe ;;
  build) cmd_build ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  built) all_built && "$HERE/keda.sh" built ;;  # exit 0 when every binary is cached (make demo asks before starting)
  reset) cmd_reset ;;
  restart-apiserver) cmd_restart_apiserver ;;
  stop-prometheus) cmd_stop_prometheus ;;
  start-prometheus) cmd_start_prometheus ;;
  *) echo "usage: $0 {probe|build|up|down|status|built|reset|restart-apiserver|stop-prometheus|start-prometheus} [--json: up, status]" >&2; exit 2 ;;
esac
