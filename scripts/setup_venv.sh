#!/usr/bin/env bash
# Creates the project's virtual environment with the pinned stack.
# Usage: scripts/setup_venv.sh VENV_DIR
set -euo pipefail
venv_dir="${1:-.venv}"
lock_file="requirements/lock.txt"

find_python310() {
  # A python3.10 on PATH first (a pyenv shim only counts if it really runs).
  if command -v python3.10 >/dev/null 2>&1 && python3.10 -c 'import sys; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1; then
    command -v python3.10
    return 0
  fi
  # Then any 3.10 that pyenv knows about.
  if command -v pyenv >/dev/null 2>&1; then
    local version
    version="$(pyenv versions --bare 2>/dev/null | grep -E '^3\.10(\.[0-9]+)?$' | sort -V | tail -n 1 || true)"
    if [ -n "$version" ]; then
      local prefix
      prefix="$(pyenv prefix "$version")"
      if [ -x "$prefix/bin/python3.10" ]; then
        echo "$prefix/bin/python3.10"
        return 0
      fi
    fi
  fi
  return 1
}

if [ ! -x "$venv_dir/bin/python" ]; then
  if ! python_bin="$(find_python310)"; then
    echo "error: tfx-distillery needs Python 3.10 (TFX 1.16 supports Python < 3.11)." >&2
    echo "Install it, e.g. 'pyenv install 3.10.13' or your system's python3.10 package, then rerun." >&2
    exit 1
  fi
  echo "Creating $venv_dir with $("$python_bin" --version)"
  "$python_bin" -m venv "$venv_dir"
fi

"$venv_dir/bin/python" -m pip install --quiet --upgrade "pip<27" setuptools wheel
echo "Installing the pinned stack from $lock_file (about 5 minutes and 3.3 GB the first time)"
"$venv_dir/bin/python" -m pip install --quiet --constraint "$lock_file" --editable ".[notebook,test]"
