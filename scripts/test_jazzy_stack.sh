#!/usr/bin/env bash
# The ROS-free suite on the numeric stack of ROS 2 Jazzy on Ubuntu 24.04: Python 3.12, numpy 1.26, scipy 1.11.
# (Ubuntu's matplotlib there is 3.6.3, which has no Python 3.12 wheel on PyPI; 3.8.4 is the oldest that has one.
#  matplotlib 3.6.3 itself is tested by the ROS stage on Debian 12's Python 3.11.)
#
#   scripts/test_jazzy_stack.sh            # uses $JAZZY_PYTHON, else python3.12 on PATH, else pyenv's 3.12
# Exits 0 with a message, testing nothing, only when no Python 3.12 is on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
is312() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; }
py=""
# shellcheck disable=SC2012
for cand in "${JAZZY_PYTHON:-}" "$(command -v python3.12 || true)" \
            $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python 2>/dev/null | sort -V -r); do
  if is312 "$cand"; then py="$cand"; break; fi  # (a pyenv shim on PATH may not run 3.12)
done
if [ -z "$py" ]; then
  echo "no Python 3.12 on this machine: the Jazzy-stack suite is not run"
  exit 0
fi
venv="${JAZZY_VENV:-.venv-jazzy}"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
touch "$venv/COLCON_IGNORE"  # not a package for colcon to find
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -c requirements-jazzy-stack.txt setuptools wheel
"$venv/bin/python" -m pip install --quiet -c requirements-jazzy-stack.txt -e '.[hardware,test,sim]' plyfile \
  pytest-xdist==3.8.0  # every core, as make test
"$venv/bin/python" - <<'PY'
import sys, numpy, scipy, matplotlib
print(f"Jazzy stack: Python {sys.version.split()[0]}, numpy {numpy.__version__}, scipy {scipy.__version__}, "
      f"matplotlib {matplotlib.__version__}")
assert numpy.__version__.startswith("1.26.") and scipy.__version__.startswith("1.11."), "not the Jazzy stack"
PY
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n auto
