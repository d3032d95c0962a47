#!/usr/bin/env bash
# The main command of README.md: installs dependencies, builds the trainer
# and the converter (not the test suite: scripts/test.sh builds the rest),
# converts Fashion-MNIST to LMDB, trains LeNet with FP16 storage and prints
# the accuracy on the 10,000 test images.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo; echo "==== quickstart $1: $2"; }
t0=$SECONDS
step "1/4" "installing the Debian packages Cortado needs (scripts/install_deps.sh; quick when present)"
bash scripts/install_deps.sh
export BUILD_DIR=${BUILD_DIR:-build}
step "2/4" "building the trainer and convert_mnist into $BUILD_DIR/ (the first build takes a while on a small"
echo "     machine, most of it the CUDA kernels where nvcc is installed; ccache makes rebuilds quick)"
tb=$SECONDS
TARGETS="trainer convert_mnist" bash scripts/build.sh
echo "     built in $((SECONDS - tb)) s"
step "3/4" "converting Fashion-MNIST to LMDB (data/fashion_mnist/create.sh)"
bash data/fashion_mnist/create.sh
SOLVER=${SOLVER:-models/lenet/solver.prototxt}
PRECISION=${PRECISION:-fp16}
LOG=${LOG:-$BUILD_DIR/lenet_${PRECISION}_train.log}
step "4/4" "training LeNet with $PRECISION storage ($SOLVER --precision=$PRECISION), log in $LOG"
"$BUILD_DIR/tools/trainer" train --solver="$SOLVER" --precision="$PRECISION" 2>&1 | tee "$LOG"
acc=$(grep "Test net output #0: accuracy" "$LOG" | tail -1 | sed 's/.*accuracy = //')
echo
echo "LeNet ($SOLVER, $PRECISION) on the 10,000 Fashion-MNIST test images: accuracy = $acc (all steps: $((SECONDS - t0)) s)"
