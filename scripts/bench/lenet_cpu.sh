#!/usr/bin/env bash
# LeNet on the CPU, Cortado against PyTorch: the same net, batch and update
# side by side in one run.
#   Cortado: `trainer time` (forward + backward + the SGD update, batch 64, the
#            Data layer included) on models/lenet/lenet_train_test.prototxt,
#            as written and with --precision=fp16 and bf16 (16-bit storage
#            computes in FP32 on the CPU; BF16 GEMMs multiply bfloat16 pairs where the CPU has
#            AVX-512 BF16). cortado_bf16_widen runs the BF16 net with
#            --cpu_bf16_dot=0 (operands widened to float, the path
#            before the AVX-512 BF16 kernel), and the ratio of the two is
#            printed.
#   PyTorch: scripts/bench/lenet_pytorch.py --mode time (forward, loss,
#            backward, SGD step, zero_grad on one batch in memory), FP32 and
#            autocast bfloat16.
# REPEATS rounds, each running every configuration once in turn (so drift
# hits all), of ITERS timed iterations after WARMUP; prints each run, the
# median over rounds of the per-run medians, and Cortado/PyTorch speed
# ratios (above 1: Cortado is faster). With TRAIN=1 it then trains each for
# 2,000 iterations (Caffe's LeNet recipe) and prints the test accuracies.
# Last, one key=value line (lenet_cpu: ...).
#
# BASELINE_TRAINER names another trainer binary (an earlier commit's build,
# say) that runs the FP32 net as one more configuration of every round (the
# file as written: no --precision, which an older trainer lacks), and the
# Cortado / baseline speed ratio is printed.
#
# Needs a build (BUILD_DIR, default build), the Fashion-MNIST LMDBs
# (data/fashion_mnist/create.sh), and a Python with PyTorch (PYTHON, default
# python3; PyTorch from PyPI: pip install torch). Without PyTorch it times
# Cortado alone. Both use every core (THREADS, default nproc).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=$BUILD_DIR/tools/trainer
PYTHON=${PYTHON:-python3}
REPEATS=${REPEATS:-5}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
THREADS=${THREADS:-$(nproc)}
[ -x "$TRAINER" ] || { echo "lenet_cpu: $TRAINER not found; build first" >&2; exit 1; }
[ -d data/fashion_mnist/train_lmdb ] || { echo "lenet_cpu: data/fashion_mnist/train_lmdb missing; run data/fashion_mnist/create.sh" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=$THREADS
HAVE_TORCH=1
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  HAVE_TORCH=0
  echo "lenet_cpu: no PyTorch for $PYTHON; timing Cortado only (PYTHON names a Python with torch)"
fi

MODEL=models/lenet/lenet_train_test.prototxt
# The --precision of each configuration; none: the file's own FP32.
declare -A precision=([cortado_fp16]=fp16 [cortado_bf16]=bf16 [cortado_bf16_widen]=bf16)
configs=(cortado_fp32 cortado_fp16 cortado_bf16 cortado_bf16_widen)
BASELINE_TRAINER=${BASELINE_TRAINER:-}
if [ -n "$BASELINE_TRAINER" ]; then
  [ -x "$BASELINE_TRAINER" ] || { echo "lenet_cpu: BASELINE_TRAINER=$BASELINE_TRAINER is not an executable" >&2; exit 1; }
  configs+=(baseline_fp32)
fi
[ "$HAVE_TORCH" = 1 ] && configs+=(pytorch_fp32 pytorch_bf16)
declare -A runs
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq 1 "$REPEATS"); do
  for c in "${configs[@]}"; do
    if [[ $c == cortado_* || $c == baseline_* ]]; then
      bin=$TRAINER
      [[ $c == baseline_* ]] && bin=$BASELINE_TRAINER
      dot=1
      [[ $c == *_widen ]] && dot=0
      prec=()
      [ -n "${precision[$c]:-}" ] && prec=(--precision="${precision[$c]}")
      ms=$(trainer_time lenet_cpu "$log" "$bin" "$dot" --model="$MODEL" "${prec[@]}" --iterations="$ITERS" \
        --warmup="$WARMUP") || exit 1
      [ "$c" = cortado_bf16 ] && BF16_GEMMS=$(grep -o 'bfloat16 GEMMs: [^:]*' "$log" | head -1)
    else
      if ! out=$("$PYTHON" scripts/bench/lenet_pytorch.py --mode time --precision "${c#pytorch_}" \
          --iters "$ITERS" --warmup "$WARMUP" --threads "$THREADS" 2>"$log"); then
        tail -20 "$log" >&2
        echo "lenet_cpu: lenet_pytorch.py failed" >&2
        exit 1
      fi
      ms=$(kv ms_median "$out")
    fi
    runs[$c]+="$ms "
    printf 'run %d %-18s %8.3f ms/iter  %6.0f images/s\n' "$r" "$c" "$ms" "$(awk -v m="$ms" 'BEGIN { print 64000 / m }')"
  done
done

declare -A med
echo "LeNet on the CPU ($THREADS threads), batch 64, median of $REPEATS runs x $ITERS iterations:"
summary="lenet_cpu: threads=$THREADS repeats=$REPEATS iterations=$ITERS"
for c in "${configs[@]}"; do
  med[$c]=$(echo "${runs[$c]}" | tr ' ' '\n' | grep . | median)
  printf '  %-18s %8.3f ms/iter  %6.0f images/s\n' "$c" "${med[$c]}" "$(awk -v m="${med[$c]}" 'BEGIN { print 64000 / m }')"
  summary+=" ${c}_ms=${med[$c]}"
done
if [ "$HAVE_TORCH" = 1 ]; then
  r32=$(ratio "${med[pytorch_fp32]}" "${med[cortado_fp32]}")
  rbf=$(ratio "${med[pytorch_bf16]}" "${med[cortado_bf16]}")
  r16=$(ratio "${med[pytorch_fp32]}" "${med[cortado_fp16]}")
  echo "  Cortado FP32 / PyTorch FP32 speed: $r32 (above 1: Cortado is faster)"
  echo "  Cortado BF16 / PyTorch autocast BF16 speed: $rbf"
  echo "  Cortado FP16 storage / PyTorch FP32 speed: $r16"
  summary+=" fp32_ratio=$r32 bf16_ratio=$rbf fp16_vs_torch_fp32_ratio=$r16"
fi

cortado_ratios

if [ "${TRAIN:-0}" = 1 ]; then
  echo "Training 2,000 iterations (Caffe's LeNet recipe), test accuracy on 10,000 images:"
  for p in fp32 fp16 bf16; do
    t0=$(date +%s.%N)
    "$TRAINER" train --solver=models/lenet/solver.prototxt --precision=$p >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
    t1=$(date +%s.%N)
    acc=$(grep 'Test net output #0: accuracy' "$log" | tail -1 | sed 's/.*= //')
    printf '  cortado %-12s accuracy %s  %.0f s\n' "$p" "$acc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
    summary+=" cortado_${p}_accuracy=$acc"
  done
  rm -f models/lenet/lenet_iter_2000.*
  if [ "$HAVE_TORCH" = 1 ]; then
    for p in fp32 bf16; do
      out=$("$PYTHON" scripts/bench/lenet_pytorch.py --mode train --precision $p --threads "$THREADS")
      printf '  pytorch %-12s accuracy %s  %s s\n' "$p" "$(kv accuracy "$out")" "$(kv seconds "$out")"
      summary+=" pytorch_${p}_accuracy=$(kv accuracy "$out")"
    done
  fi
fi
echo "$summary"
