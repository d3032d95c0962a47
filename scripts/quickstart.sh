#!/usr/bin/env bash
# The main command of README.md: installs dependencies, builds Cortado,
# converts Fashion-MNIST to LMDB, trains LeNet with FP16 storage and prints
# the accuracy on the 10,000 test images.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
export BUILD_DIR=${BUILD_DIR:-build}
bash scripts/build.sh
bash data/fashion_mnist/create.sh
SOLVER=${SOLVER:-models/lenet/solver_fp16.prototxt}
LOG=${LOG:-$BUILD_DIR/lenet_fp16_train.log}
"$BUILD_DIR/tools/trainer" train --solver="$SOLVER" 2>&1 | tee "$LOG"
acc=$(grep "Test net output #0: accuracy" "$LOG" | tail -1 | sed 's/.*accuracy = //')
echo
echo "LeNet ($SOLVER) on the 10,000 Fashion-MNIST test images: accuracy = $acc"
