#!/usr/bin/env bash
# Build Helm from its Go module into ~/.cache/gpuplatform/bin/helm-<version>, as
# deploy/local-cluster/cluster.sh does for the cluster's binaries, and print its path.
# Module, version and build flags: deploy/stack/components/helm.py.
# A cached binary is reused; a cold build takes a few minutes on two cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
declared=$(cd "$ROOT" && python3 -E -m deploy.stack.components env helm) || exit 1
while IFS= read -r line; do export "${line?}"; done <<<"$declared"
CACHE_DIR="${GPUPLATFORM_CACHE_DIR:-$HOME/.cache/gpuplatform}"
BIN="$HELM_BIN"
if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
command -v go >/dev/null || { echo "error: go is not on PATH (needed to build helm)" >&2; exit 1; }
mkdir -p "$CACHE_DIR/bin" "$CACHE_DIR/build-logs"
out="$(mktemp -d "$CACHE_DIR/build.XXXXXX")"
trap 'rm -rf "$out"' EXIT
log="$CACHE_DIR/build-logs/helm.log"
echo "[helm] building helm $HELM_VERSION from $HELM_MODULE (log: $log)" >&2
if ! (cd "$out" && GOBIN="$out" GOFLAGS=-buildvcs=false go install -p "${GPUPLATFORM_BUILD_P:-2}" \
      -ldflags "$HELM_LDFLAGS" "$HELM_PACKAGE@$HELM_VERSION") >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "error: building helm $HELM_VERSION failed (see $log)" >&2
  exit 1
fi
mv -f "$out/helm" "$BIN"
echo "$BIN"
