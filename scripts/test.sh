#!/usr/bin/env bash
# The test command of README.md: installs dependencies, configures, builds,
# and runs the whole test suite with ctest, then prints one line
# "tests: N passed, N failed, N skipped" (the GPU cases skip without a
# device).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
BUILD_DIR=${BUILD_DIR:-build}
bash scripts/build.sh
# ONNX Runtime (PyPI) for the ONNX export's test, into $BUILD_DIR/pyenv.
bash scripts/install_python_deps.sh "$BUILD_DIR"
cd "$BUILD_DIR"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
ctest --output-on-failure -j "${JOBS:-$(nproc)}" "$@" 2>&1 | tee "$log" || status=$?
total=$(sed -n 's/.* tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)
skipped=$(grep -c '(Skipped)' "$log" || true)
if [ -n "$total" ] && [ -n "$failed" ]; then
  echo
  echo "tests: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
fi
exit "$status"
