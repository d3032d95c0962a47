#!/usr/bin/env bash
# LeNet on the GPU, FP32 against FP16 (and BF16) storage: `trainer time --gpu`
# on models/lenet/lenet_train_test.prototxt with --precision=fp32, fp16 and bf16
# (batch 64, forward + backward + the SGD update, the Data layer included;
# trainer time's default update, as in training), REPEATS runs of
# ITERS timed iterations after WARMUP untimed ones, FP32, FP16 and BF16
# alternating so that clock or thermal drift hits all. Prints each run, the
# median over runs of the per-run median ms/iteration, FP32/FP16 (the FP16
# speed-up) and FP32/BF16,
# then one key=value line (lenet_gpu: ...).
#
# Needs a CUDA build (BUILD_DIR, default build-gpu, else build) and the
# Fashion-MNIST LMDBs (data/fashion_mnist/create.sh).
# Environment: GPU (0; `cpu` runs the same on the CPU, a smoke test of the
# script), REPEATS (5), ITERS (200), WARMUP (20), BATCH (the training batch;
# default the prototxt's 64: at 64 LeNet is bound by kernel launches, a
# larger batch shows the FP16 bandwidth saving).
# Last, from the final run of each: the layers side by side (forward +
# backward ms, synchronized after each layer, and FP32/FP16), which shows
# where FP16 wins or loses.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
if [ -z "${BUILD_DIR:-}" ]; then
  BUILD_DIR=build-gpu
  [ -x "$BUILD_DIR/tools/trainer" ] || BUILD_DIR=build
fi
TRAINER=$BUILD_DIR/tools/trainer
GPU=${GPU:-0}
REPEATS=${REPEATS:-5}
ITERS=${ITERS:-200}
WARMUP=${WARMUP:-20}
[ -x "$TRAINER" ] || { echo "lenet_gpu: $TRAINER not found; build first" >&2; exit 1; }
[ -d data/fashion_mnist/train_lmdb ] || { echo "lenet_gpu: data/fashion_mnist/train_lmdb missing; run data/fashion_mnist/create.sh" >&2; exit 1; }


if [ "$GPU" = cpu ]; then
  gpu_flag=()
  want_device=cpu
else
  gpu_flag=(--gpu="$GPU")
  want_device=gpu$GPU
fi

declare -A runs=([fp32]="" [fp16]="" [bf16]="") conversions=([fp32]="" [fp16]="" [bf16]="")
MODEL=models/lenet/lenet_train_test.prototxt
log=$(mktemp)
declare -A last=([fp32]=$(mktemp) [fp16]=$(mktemp) [bf16]=$(mktemp))
trap 'rm -f "$log" "${last[fp32]}" "${last[fp16]}" "${last[bf16]}"' EXIT
batch_flag=()
[ -n "${BATCH:-}" ] && batch_flag=(--batch_size="$BATCH")
for r in $(seq 1 "$REPEATS"); do
  for p in fp32 fp16 bf16; do
    if ! "$TRAINER" time --model="$MODEL" --precision="$p" "${gpu_flag[@]}" --iterations="$ITERS" --warmup="$WARMUP" \
        "${batch_flag[@]}" >"${last[$p]}" 2>"$log" || ! out=$(grep '^time:' "${last[$p]}"); then
      tail -20 "$log" >&2
      echo "lenet_gpu: trainer time failed for $MODEL --precision=$p" >&2
      exit 1
    fi
    [ "$(kv device "$out")" = "$want_device" ] || { echo "lenet_gpu: trainer did not run on $want_device: $out" >&2; exit 1; }
    ms=$(kv total_ms_median "$out")
    batch=$(kv batch "$out")
    runs[$p]+="$ms "
    conversions[$p]=$(kv conversions_per_iter "$out")
    printf 'run %d %s: %s ms/iter (forward %s, backward %s, update %s), %s images/s, %s type conversions/iter\n' \
      "$r" "$p" "$ms" "$(kv forward_ms_median "$out")" "$(kv backward_ms_median "$out")" \
      "$(kv update_ms_median "$out")" "$(kv images_per_s "$out")" "$(kv conversions_per_iter "$out")"
  done
done
m32=$(echo "${runs[fp32]}" | tr ' ' '\n' | grep . | median)
m16=$(echo "${runs[fp16]}" | tr ' ' '\n' | grep . | median)
mbf=$(echo "${runs[bf16]}" | tr ' ' '\n' | grep . | median)
speedup=$(awk -v a="$m32" -v b="$m16" 'BEGIN { printf "%.2f", a / b }')
speedup_bf=$(awk -v a="$m32" -v b="$mbf" 'BEGIN { printf "%.2f", a / b }')
# The layers-by-cost tables of the last runs, joined by layer name.
layer_table() {
  awk '/^Layers by cost/ { on = 1; getline; next } /^By layer type/ { on = 0 } on && NF >= 7 { print $2, $3, $6 }' "$1"
}
echo "Layers, last run of each (forward + backward ms, synchronized after each layer):"
printf '  %-10s %-18s %9s %9s %10s\n' layer type fp32 fp16 fp32/fp16
join <(layer_table "${last[fp32]}" | sort) <(layer_table "${last[fp16]}" | sort) |
  sort -k3,3gr | awk '{ printf "  %-10s %-18s %9.3f %9.3f %10.2f\n", $1, $2, $3, $5, ($5 > 0 ? $3 / $5 : 0) }'
echo "LeNet on $want_device, batch $batch, median of $REPEATS runs x $ITERS iterations:"
echo "  FP32: $m32 ms/iter ($(awk -v m="$m32" -v b="$batch" 'BEGIN { printf "%.0f", b * 1000 / m }') images/s)"
echo "  FP16: $m16 ms/iter ($(awk -v m="$m16" -v b="$batch" 'BEGIN { printf "%.0f", b * 1000 / m }') images/s)"
echo "  BF16: $mbf ms/iter ($(awk -v m="$mbf" -v b="$batch" 'BEGIN { printf "%.0f", b * 1000 / m }') images/s)"
echo "  FP32/FP16 = $speedup (above 1: FP16 is faster)"
echo "  FP32/BF16 = $speedup_bf"
echo "lenet_gpu: fp32_ms=$m32 fp16_ms=$m16 speedup=$speedup bf16_ms=$mbf bf16_speedup=$speedup_bf repeats=$REPEATS iterations=$ITERS warmup=$WARMUP batch=$batch gpu=$GPU fp32_conversions=${conversions[fp32]} fp16_conversions=${conversions[fp16]} bf16_conversions=${conversions[bf16]}"
