#!/usr/bin/env bash
# Configures and builds Cortado into $BUILD_DIR (default build/).
# Extra arguments go to CMake's configure step (e.g. -DUSE_CUDA=OFF).
# TARGETS (space-separated) builds only those targets (default: all,
# the tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
