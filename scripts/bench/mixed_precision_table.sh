#!/usr/bin/env bash
# Trains LeNet on Fashion-MNIST (60,000 training images, 2,000 iterations of
# 64, Caffe's LeNet solver settings, random_seed 1) once per precision recipe
# and prints a markdown table of test accuracy (10,000 test images) and
# skipped steps, with the command behind each row. Run from anywhere; needs
# the build (scripts/build.sh) and the data (data/fashion_mnist/create.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
TRAINER="$BUILD_DIR/tools/trainer"
LOGDIR=${LOGDIR:-$BUILD_DIR/mixed_precision_logs}
mkdir -p "$LOGDIR"
bash data/fashion_mnist/create.sh >/dev/null

# Recipe|solver|precision (the trainer's --precision flag).
rows=(
  "FP32|solver.prototxt|fp32"
  "FP16 storage, FP32 master weights (mixed precision)|solver.prototxt|fp16"
  "FP16 storage, no master weights|solver_fp16_no_master.prototxt|fp16"
  "Mixed precision + static loss scale 1024|solver_fp16_static_scale.prototxt|fp16"
  "Mixed precision + dynamic loss scale|solver_fp16_dynamic_scale.prototxt|fp16"
  "FP16 storage, FP16 solver data (H = mH + dW)|solver_fp16_solver_data.prototxt|fp16"
  "BF16 storage, FP32 master weights, no loss scaling|solver.prototxt|bf16"
)

echo "| Recipe | Test accuracy | Skipped steps | Train time (s) | Command |"
echo "|---|---|---|---|---|"
for row in "${rows[@]}"; do
  IFS='|' read -r name file precision <<<"$row"
  solver=models/lenet/$file
  log="$LOGDIR/$(basename "$solver" .prototxt)_$precision.log"
  start=$(date +%s)
  "$TRAINER" train --solver="$solver" --precision="$precision" > "$log" 2>&1
  secs=$(( $(date +%s) - start ))
  acc=$(grep "Test net output #0: accuracy" "$log" | tail -1 | sed 's/.*accuracy = //')
  skipped=$(grep -c "update skipped" "$log" || true)
  echo "| $name | $acc | $skipped | $secs | \`trainer train --solver=$solver --precision=$precision\` |"
done
