#!/usr/bin/env bash
# KEDA on the local cluster (inference autoscaling on GPU utilization, docs/telemetry.md):
# its operator and its metrics API server built from the Go module (github.com/kedacore/keda/v2)
# and run as local processes against the cluster cluster.sh runs, with KEDA's CRDs from the
# same module. The metrics server serves external.metrics.k8s.io through the API server's
# aggregation layer (an APIService, as cluster.sh does for Kueue's visibility API); operator
# and metrics server talk gRPC with mutual TLS on 127.0.0.1. cluster.sh build/up/down/status/built
# call this script; it may also be run alone, with the same environment (GPUPLATFORM_PROFILE or
# GPUPLATFORM_CLUSTER_DIR,
# GPUPLATFORM_CLUSTER_PORT_OFFSET, GPUPLATFORM_CACHE_DIR).
#
#   keda.sh build    build the two binaries into ~/.cache/gpuplatform/bin (cached by version)
#   keda.sh up       build if needed, apply the CRDs, start both, wait until the external
#                    metrics API answers through the aggregator (the cluster must be up)
#   keda.sh down     stop both
#   keda.sh status   show both processes and whether the external metrics API is served
#   keda.sh built    exit 0 when both binaries are built (nothing else)
#
# In production KEDA is an optional prerequisite that the cluster's operators install (its
# Helm chart); the platform never installs or vendors it.
set -euo pipefail

# The cluster's helpers and settings: ports and directories by the same OFFSET scheme, every
# component's declared facts (KEDA's: deploy/stack/components/keda.py, KEDA_VERSION,
# KEDA_MODULE, KEDA_*_PORT, KEDA_OPERATOR_BIN ...), bin, build_component, start, stop_group,
# sign, kubectl_, lock ... (cluster.sh runs nothing when sourced).
# shellcheck source-path=SCRIPTDIR source=cluster.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cluster.sh"

KEDA_NAMESPACE=keda
KEDA_PKI="$PKI/keda"
KEDA_API=/apis/external.metrics.k8s.io/v1beta1

keda_built() { component_built keda; }

keda_build() {
  if keda_built; then log "build: keda is cached"; return 0; fi
  require_go
  build_component keda
}

keda_module_dir() {
  local dir
  dir="$(gomodcache_or_die)/$KEDA_MODULE@$KEDA_VERSION"
  if [[ ! -d "$dir" ]]; then # binaries cached but module cache cleaned
    require_go
    (cd "$MODULES/keda" && go mod download "$KEDA_MODULE@$KEDA_VERSION")
  fi
  echo "$dir"
}

# One certificate of the cluster's CA for both ends of the gRPC link (server and client
# auth: KEDA checks both with ca.crt of the same directory) and for the metrics server's
# serving side, which the aggregator checks for <service>.<namespace>.svc.
ensure_keda_pki() {
  [[ -s "$KEDA_PKI/tls.crt" ]] && return 0
  ensure_openssl
  log "certificates: KEDA's operator and metrics server ($KEDA_PKI)"
  mkdir -p "$KEDA_PKI"
  cp "$PKI/ca.crt" "$KEDA_PKI/ca.crt"
  sign keda/tls "/CN=keda-metrics-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:keda-metrics-apiserver.$KEDA_NAMESPACE.svc,DNS:keda-operator.$KEDA_NAMESPACE.svc"
}

keda_apply_crds() {
  local crds marker
  crds="$(keda_module_dir)/config/crd/bases"
  marker="$CLUSTER_DIR/crds-applied-keda-$KEDA_VERSION"
  if [[ -f "$marker" ]] && kubectl_ get crd scaledobjects.keda.sh >/dev/null 2>&1; then return 0; fi
  log "CRDs: KEDA $KEDA_VERSION (server-side apply)"
  kubectl_ apply --server-side --force-conflicts -f "$crds" >/dev/null
  # (kubectl wait fails at once on a CRD whose status has no conditions yet: ask again)
  wait_for "KEDA's CRDs to be established" 60 kubectl_ wait --for condition=Established --timeout 5s \
    crd scaledobjects.keda.sh triggerauthentications.keda.sh clustertriggerauthentications.keda.sh
  touch "$marker"
}

# The aggregation layer's way to the metrics server: an APIService whose Service is an
# ExternalName for 127.0.0.1, checked with the cluster's CA.
keda_apply_apiservice() {
  kubectl_ apply --server-side --force-conflicts -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $KEDA_NAMESPACE
---
apiVersion: v1
kind: Service
metadata:
  name: keda-metrics-apiserver
  namespace: $KEDA_NAMESPACE
  labels: {app.kubernetes.io/part-of: gpuplatform-local-cluster}
spec:
  type: ExternalName
  externalName: 127.0.0.1
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.external.metrics.k8s.io
  labels: {app.kubernetes.io/part-of: gpuplatform-local-cluster}
spec:
  group: external.metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: $(base64 -w0 <"$PKI/ca.crt")
  service:
    name: keda-metrics-apiserver
    namespace: $KEDA_NAMESPACE
    port: $KEDA_ADAPTER_PORT
EOF
}

keda_up() {
  apiserver_ready >/dev/null 2>&1 || die "the local cluster is not up (cluster.sh up first)"
  keda_built || keda_build
  ensure_keda_pki
  keda_apply_crds
  keda_apply_apiservice
  mkdir -p "$LOGS" "$PIDS"
  # Both read the kubeconfig and KEDA's namespaces from the environment (all namespaces watched).
  export KUBECONFIG="$KUBECONFIG_PATH" POD_NAMESPACE="$KEDA_NAMESPACE" \
    KEDA_CLUSTER_OBJECT_NAMESPACE="$KEDA_NAMESPACE" WATCH_NAMESPACE=""
  run_declared start_current keda-operator
  run_declared start_current keda-adapter
  local deadline=$((SECONDS + 120))
  until components ready keda \
      && kubectl_ get --raw "$KEDA_API" >/dev/null 2>&1; do
    alive_or_die keda-operator
    alive_or_die keda-adapter
    ((SECONDS < deadline)) || die "timed out waiting for KEDA (logs: $LOGS/keda-operator.log, $LOGS/keda-adapter.log)"
    sleep 0.5
  done
  log "KEDA $KEDA_VERSION: operator and external metrics API ready"
}

keda_down() { stop_group keda-adapter keda-operator; rm -f "$PIDS"/keda-*.pid; }

keda_status() {
  local name rc=0
  for name in keda-operator keda-adapter; do
    if is_running "$name"; then printf '%-28s running (pid %s)\n' "$name" "$(cat "$PIDS/$name.pid")"
    else printf '%-28s stopped\n' "$name"; rc=1; fi
  done
  if [[ $rc == 0 ]] && ! kubectl_ get --raw "$KEDA_API" >/dev/null 2>&1; then
    echo "external.metrics.k8s.io: not served through the aggregator"; rc=1
  fi
  return $rc
}

# Run by cluster.sh, which already holds the lock (fd 9, inherited): take it only when alone.
keda_lock() { [[ "$(readlink /proc/$$/fd/9 2>/dev/null)" == "$CACHE_DIR/cluster.lock" ]] || lock; }

# The build under a lock of its own, not the cluster's: with GPUPLATFORM_KEDA=later the
# cluster starts and its tests run while KEDA builds (one build at a time all the same).
keda_build_alone() {
  mkdir -p "$CACHE_DIR"
  exec 8>"$CACHE_DIR/keda-build.lock"
  if command -v flock >/dev/null 2>&1 && ! flock -n 8; then
    log "waiting for another KEDA build to finish (log: $CACHE_DIR/build-logs/keda.log)"
    flock 8
  fi
  keda_build
  exec 8>&-  # released here: the processes `up` starts next must not hold it
}

case "${1:-}" in
  build) keda_build_alone ;;
  up) keda_build_alone; keda_lock; keda_up ;;
  down) keda_lock; keda_down ;;
  status) keda_status ;;
  built) keda_built ;;
  *) echo "usage: $0 {build|up|down|status|built}" >&2; exit 2 ;;
esac
