#!/usr/bin/env bash
# The Data layer's batch rate on the host, FP32 against FP16 output:
# `trainer time` (CPU) on a net of one Fashion-MNIST Data layer (batch BATCH,
# default 1024) and a Silence layer, once with forward_type FLOAT and once
# FLOAT16, alternating, REPEATS runs of ITERS batches; prints the median ms
# per batch of each and FP16/FP32. The reader thread transforms records into
# the layer's type, so this measures what feeds a GPU net.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=$BUILD_DIR/tools/trainer
BATCH=${BATCH:-1024}
REPEATS=${REPEATS:-5}
ITERS=${ITERS:-30}
[ -d data/fashion_mnist/train_lmdb ] || bash data/fashion_mnist/create.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in FLOAT FLOAT16; do
  cat > "$tmp/$t.prototxt" <<NET
name: "data_$t"
default_forward_type: $t
default_backward_type: $t
layer { name: "data" type: "Data" top: "data" top: "label" transform_param { scale: 0.00390625 }
  data_param { source: "data/fashion_mnist/train_lmdb" batch_size: $BATCH } }
layer { name: "silence" type: "Silence" bottom: "data" bottom: "label" }
NET
done
declare -A runs=([FLOAT]="" [FLOAT16]="")
for r in $(seq 1 "$REPEATS"); do
  for t in FLOAT FLOAT16; do
    ms=$("$TRAINER" time --model="$tmp/$t.prototxt" --iterations="$ITERS" 2>&1 | sed -n 's/.*data\s*forward: \([0-9.e+-]*\) ms.*/\1/p' | tail -1)
    runs[$t]+="$ms "
    echo "run $r $t: $ms ms/batch"
  done
done
m32=$(echo "${runs[FLOAT]}" | tr ' ' '\n' | grep . | median)
m16=$(echo "${runs[FLOAT16]}" | tr ' ' '\n' | grep . | median)
echo "Data layer, batch $BATCH, median of $REPEATS runs x $ITERS batches: FP32 $m32 ms/batch, FP16 $m16 ms/batch, FP16/FP32 = $(awk -v a="$m16" -v b="$m32" 'BEGIN { printf "%.2f", a / b }')"
