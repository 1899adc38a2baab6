#!/usr/bin/env bash
# Build Helm from its Go module (helm.sh/helm/v4) into ~/.cache/gpuplatform/bin/helm-<version>,
# as deploy/local-cluster/cluster.sh does for the cluster's binaries, and print its path.
# A cached binary is reused; a cold build takes a few minutes on two cores.
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v4.3.2}"
CACHE_DIR="${GPUPLATFORM_CACHE_DIR:-$HOME/.cache/gpuplatform}"
BIN="$CACHE_DIR/bin/helm-$HELM_VERSION"
if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
command -v go >/dev/null || { echo "error: go is not on PATH (needed to build helm)" >&2; exit 1; }
mkdir -p "$CACHE_DIR/bin" "$CACHE_DIR/build-logs"
out="$(mktemp -d "$CACHE_DIR/build.XXXXXX")"
trap 'rm -rf "$out"' EXIT
log="$CACHE_DIR/build-logs/helm.log"
echo "[helm] building helm $HELM_VERSION from helm.sh/helm/v4 (log: $log)" >&2
if ! (cd "$out" && GOBIN="$out" GOFLAGS=-buildvcs=false go install -p "${GPUPLATFORM_BUILD_P:-2}" \
      -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
      "helm.sh/helm/v4/cmd/helm@$HELM_VERSION") >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "error: building helm $HELM_VERSION failed (see $log)" >&2
  exit 1
fi
mv -f "$out/helm" "$BIN"
echo "$BIN"
