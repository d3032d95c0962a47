#!/usr/bin/env bash
# Installs the Python packages that Debian 12 lacks into a virtual
# environment under the build folder: ONNX Runtime, the consumer that checks
# the ONNX export (tests/scripts/onnx_export_test.py), and TensorBoard, whose
# own reader checks trainer train --tensorboard's event files
# (tests/scripts/tensorboard_test.py; 2.20 is the last release that accepts
# Debian's protobuf, 2.21 wants protobuf 6). The venv sees
# Debian's packages (--system-site-packages: numpy, protobuf, onnx from
# scripts/install_deps.sh), so pip adds only what is missing; the versions
# are pinned to ones that run on Debian 12's Python 3.11, numpy 1.24 and
# protobuf 3.21 without replacing them.
#
#   bash scripts/install_python_deps.sh [BUILD_DIR]     (default: build)
#
# Quick when already installed. Where PyPI cannot be reached it says so,
# writes the reason to BUILD_DIR/pyenv/UNAVAILABLE (the ONNX test then skips
# its ONNX Runtime comparisons, the TensorBoard test skips, each saying why)
# and exits 0, so that a machine without a network still runs the rest of
# the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-${BUILD_DIR:-build}}
VENV="$BUILD_DIR/pyenv"
PYTHON=/usr/bin/python3   # Debian's, whose packages the venv sees
REQUIREMENTS=(onnxruntime==1.24.4 flatbuffers==25.12.19
              tensorboard==2.20.0 tensorboard-data-server==0.7.2 grpcio==1.85.4)

if [ -x "$VENV/bin/python3" ] && "$VENV/bin/python3" - "${REQUIREMENTS[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if all(version(r.split("==")[0]) == r.split("==")[1] for r in sys.argv[1:]) else 1)
PY
then
  rm -f "$VENV/UNAVAILABLE"
  exit 0
fi

mkdir -p "$BUILD_DIR"
if [ ! -x "$VENV/bin/python3" ]; then
  "$PYTHON" -m venv --system-site-packages "$VENV"
fi
log="$VENV/pip.log"
echo "install_python_deps: installing ${REQUIREMENTS[*]} into $VENV"
if "$VENV/bin/python3" -m pip install --disable-pip-version-check --no-input "${REQUIREMENTS[@]}" >"$log" 2>&1; then
  rm -f "$VENV/UNAVAILABLE"
  exit 0
fi
# Tell "PyPI cannot be reached" (no network: skip) from a real failure (a
# pin that no longer resolves: fail): pip says the same about both, but
# only a reachable index can list a package's versions.
if ! "$VENV/bin/python3" -m pip index versions onnxruntime --disable-pip-version-check >/dev/null 2>&1; then
  echo "pip could not reach the package index ($(grep -m1 'Looking in indexes' "$log" || echo PyPI)): $(grep -m1 ERROR "$log")" \
    >"$VENV/UNAVAILABLE"
  echo "install_python_deps: $(cat "$VENV/UNAVAILABLE"); the ONNX Runtime comparisons and the TensorBoard test will be skipped"
  exit 0
fi
cat "$log" >&2
exit 1
