#!/usr/bin/env bash
# Build the platform's OCI image without a container registry or a Docker engine:
#   1. a Debian root filesystem from Debian's packages (mmdebstrap), cached by its recipe;
#   2. the dependencies as wheels, downloaded on this machine (cached by the dependency list);
#   3. the image on top of it (buildah, vfs storage, chroot isolation): the dependencies
#      installed offline into /opt/venv, the project in /app, static files collected, a
#      non-root user; then an OCI archive in $OUT (default var/image/gpuplatform-<version>.oci.tar).
# One image serves every role (web, worker, beat, watcher, migrations): the chart picks the
# command. Needs root (mmdebstrap's chroot mode) and the Debian packages mmdebstrap and
# buildah; `make image` runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."

SUITE="${IMAGE_DEBIAN_SUITE:-trixie}"          # Python 3.13, as Django 6 needs >= 3.12
PACKAGES="python3,python3-venv,ca-certificates,tzdata,tini"
CACHE="${GPUPLATFORM_CACHE_DIR:-$HOME/.cache/gpuplatform}/image"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
TAG="${IMAGE_TAG:-localhost/gpuplatform:$VERSION}"
OUT="${OUT:-var/image/gpuplatform-$VERSION.oci.tar}"
STORAGE=(--storage-driver vfs --root "$CACHE/storage" --runroot "$CACHE/run")

log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
for tool in mmdebstrap buildah; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing (apt-get install -y mmdebstrap buildah)" >&2; exit 1; }
done
mkdir -p "$CACHE" "$(dirname "$OUT")"

# 1. The root filesystem, rebuilt only when its recipe changes (or after 30 days, for
#    security updates).
recipe="$(printf '%s|%s|minbase' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-12)"
rootfs="$CACHE/rootfs-$SUITE-$recipe.tar"
if [[ -f "$rootfs" && -z "$(find "$rootfs" -mtime +30)" ]]; then
  log "root filesystem: cached ($rootfs)"
else
  log "root filesystem: mmdebstrap $SUITE ($PACKAGES)"
  # --format: mmdebstrap guesses the format from the name, and "*.tar.part" reads as a
  # directory. A directory left by such a build would swallow the `mv` below: remove it.
  rm -rf "$rootfs" "$rootfs.part"
  # The hooks' "$1" is mmdebstrap's (the root it builds), expanded by it, not by us.
  # shellcheck disable=SC2016
  mmdebstrap --quiet --format=tar --variant=minbase --include="$PACKAGES" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='chroot "$1" apt-get clean' --customize-hook='rm -rf "$1"/var/lib/apt/lists/*' \
    "$SUITE" "$rootfs.part"
  mv -f "$rootfs.part" "$rootfs"
fi

# 2. The dependencies as wheels for the image's Python (CPython 3.13, glibc), downloaded
#    here with this machine's pip and trust store, cached by the dependency list; the image
#    build then installs them offline (no network, no compiler inside the build).
deps="$(python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')"
wheels="$CACHE/wheels-$(printf '%s' "$deps" | sha256sum | cut -c1-12)"
if [[ ! -f "$wheels/.complete" ]]; then
  log "wheels: downloading the dependencies for CPython 3.13 into $wheels"
  rm -rf "$wheels" && mkdir -p "$wheels"
  printf '%s\n' "$deps" > "$wheels/requirements.txt"
  python3 -m pip download --quiet --only-binary=:all: --implementation cp --python-version 3.13 --abi cp313 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_34_x86_64 -d "$wheels" -r "$wheels/requirements.txt"
  touch "$wheels/.complete"
fi

# 3. The image. The build context holds only what the image needs (no tests, no var/).
context="$(mktemp -d "$CACHE/context.XXXXXX")"
trap 'rm -rf "$context"' EXIT
cp "$rootfs" "$context/rootfs.tar"
mkdir "$context/wheels" && cp "$wheels"/*.whl "$wheels/requirements.txt" "$context/wheels/"
# The tracked files only (deploy/image/sources.sh), but the tests, docs, deployment,
# benchmarks and scripts: nothing untracked in this checkout reaches the image.
mkdir -p "$context/src"
deploy/image/sources.sh | tar --null -T - -cf - | tar -xf - -C "$context/src"
cp deploy/image/Containerfile "$context/Containerfile"
log "buildah bud $TAG"
start=$SECONDS
buildah "${STORAGE[@]}" bud --quiet --isolation chroot --layers=false --squash -t "$TAG" -f "$context/Containerfile" "$context" >/dev/null
rm -f "$OUT"
buildah "${STORAGE[@]}" push --quiet "$TAG" "oci-archive:$OUT:$TAG"
# The tag moved to this build: the storage drops the images it left untagged (vfs holds a
# full copy of each, and the cache outlives every CI run).
buildah "${STORAGE[@]}" rmi --prune >/dev/null
log "built $TAG in $((SECONDS - start))s: $OUT ($(du -h "$OUT" | cut -f1) compressed layers)"
echo "$TAG"
