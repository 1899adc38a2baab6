#!/usr/bin/env bash
# The files of a checkout that go into the image, NUL-separated, relative to its top:
#   deploy/image/sources.sh [REPO]     (default: this checkout)
# build.sh copies exactly these into the build context: the files git tracks (the index,
# so a file just `git add`ed counts; their content as the work tree has it, so a build
# tests uncommitted edits), never an untracked one, ignored or not (a stray .env, a dump,
# a key lying in the checkout), and none of the tests, docs, deployment files, benchmarks,
# scripts or dotfiles. Tracked files deleted from the work tree are left out.
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
git ls-files -z --cached \
  | while IFS= read -r -d '' f; do
      case "$f" in tests/*|docs/*|deploy/*|bench/*|scripts/*|.ci/*|var/*|.*) continue ;; esac
      if [[ -f "$f" || -L "$f" ]]; then printf '%s\0' "$f"; fi
    done
