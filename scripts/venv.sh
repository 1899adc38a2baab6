#!/usr/bin/env bash
# Make sure .venv exists with a Python >= 3.12 (Django 6 needs it) and the project installed.
# Usage: scripts/venv.sh [extra]   e.g. scripts/venv.sh dev
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"

find_python() {
  local candidate
  # pyenv's version directories, newest first (sort -V; no odd names there).
  # shellcheck disable=SC2012
  for candidate in "${PYTHON:-}" python3.13 python3.12 \
      $(ls -d "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV) python3; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || [ -x "$candidate" ] || continue
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

if [ ! -x .venv/bin/python ]; then
  python=$(find_python) || { echo "error: Python 3.12 or newer is needed (Django 6); set PYTHON=/path/to/python3.12" >&2; exit 1; }
  echo "==> creating .venv with $($python --version)"
  "$python" -m venv .venv
fi

spec="."; [ -n "$extra" ] && spec=".[$extra]"
stamp=".venv/.installed-${extra:-base}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "==> installing $spec into .venv"
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -e "$spec"
  touch "$stamp"
fi
