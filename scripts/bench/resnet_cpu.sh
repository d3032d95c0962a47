#!/usr/bin/env bash
# ResNet training on the CPU, Cortado against PyTorch, side by side in one run.
#   Cortado: `trainer time` (forward + backward + the SGD update) on
#            models/$ARCH/train_val.prototxt in its synthetic stage (a
#            DummyData: no data loading), as written and with
#            --precision=bf16, at batch BATCH.
#   PyTorch: scripts/bench/resnet_cpu_pytorch.py, torchvision's $ARCH on one
#            synthetic batch in memory, FP32 and autocast bfloat16.
# ARCH: resnet18 (default) or resnet50. REPEATS rounds (default 3), each
# running every configuration once in turn (so drift hits all), of ITERS
# timed iterations (default 5) after WARMUP (default 2); prints each run,
# the median over rounds of the per-run medians, and the Cortado / PyTorch
# speed ratios (above 1: Cortado is faster). BASELINE_TRAINER names another
# trainer binary (an earlier commit's build, say) that runs the FP32 net as
# one more configuration (as written: no --precision, which an older trainer
# lacks), and the Cortado / baseline ratio is printed. Last,
# one key=value line (resnet_cpu: ...).
#
# Needs a build (BUILD_DIR, default build) and a Python with PyTorch and
# torchvision (PYTHON, default python3; from PyPI: pip install torch
# torchvision). Without them it times Cortado alone. Both use every core
# (THREADS, default nproc).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=$BUILD_DIR/tools/trainer
PYTHON=${PYTHON:-python3}
ARCH=${ARCH:-resnet18}
BATCH=${BATCH:-16}
REPEATS=${REPEATS:-3}
ITERS=${ITERS:-5}
WARMUP=${WARMUP:-2}
THREADS=${THREADS:-$(nproc)}
BASELINE_TRAINER=${BASELINE_TRAINER:-}
case "$ARCH" in resnet18 | resnet50) ;; *) echo "resnet_cpu: ARCH=$ARCH: resnet18 or resnet50" >&2; exit 1 ;; esac
[ -x "$TRAINER" ] || { echo "resnet_cpu: $TRAINER not found; build first" >&2; exit 1; }
if [ -n "$BASELINE_TRAINER" ] && [ ! -x "$BASELINE_TRAINER" ]; then
  echo "resnet_cpu: BASELINE_TRAINER=$BASELINE_TRAINER is not an executable" >&2
  exit 1
fi
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
HAVE_TORCH=1
if ! "$PYTHON" -c 'import torch, torchvision' 2>/dev/null; then
  HAVE_TORCH=0
  echo "resnet_cpu: no PyTorch with torchvision for $PYTHON; timing Cortado only"
fi

MODEL=models/$ARCH/train_val.prototxt
# The --precision of each configuration; none: the file's own FP32.
declare -A precision=([cortado_bf16]=bf16 [cortado_bf16_widen]=bf16)
configs=(cortado_fp32 cortado_bf16 cortado_bf16_widen)
[ -n "$BASELINE_TRAINER" ] && configs+=(baseline_fp32)
[ "$HAVE_TORCH" = 1 ] && configs+=(pytorch_fp32 pytorch_bf16)
declare -A runs
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq 1 "$REPEATS"); do
  for c in "${configs[@]}"; do
    if [[ $c == pytorch_* ]]; then
      if ! out=$("$PYTHON" scripts/bench/resnet_cpu_pytorch.py --arch "$ARCH" --precision "${c#pytorch_}" \
          --batch "$BATCH" --iters "$ITERS" --warmup "$WARMUP" --threads "$THREADS" 2>"$log"); then
        tail -20 "$log" >&2
        echo "resnet_cpu: resnet_cpu_pytorch.py failed" >&2
        exit 1
      fi
      ms=$(kv ms_median "$out")
    else
      bin=$TRAINER
      [[ $c == baseline_* ]] && bin=$BASELINE_TRAINER
      dot=1
      [[ $c == *_widen ]] && dot=0
      prec=()
      [ -n "${precision[$c]:-}" ] && prec=(--precision="${precision[$c]}")
      ms=$(trainer_time resnet_cpu "$log" "$bin" "$dot" --model="$MODEL" --stage=synthetic "${prec[@]}" \
        --batch_size="$BATCH" --iterations="$ITERS" --warmup="$WARMUP") || exit 1
      [ "$c" = cortado_bf16 ] && BF16_GEMMS=$(grep -o 'bfloat16 GEMMs: [^:]*' "$log" | head -1)
    fi
    runs[$c]+="$ms "
    printf 'run %d %-18s %9.1f ms/iter  %6.2f images/s\n' "$r" "$c" "$ms" \
      "$(awk -v m="$ms" -v b="$BATCH" 'BEGIN { print b * 1000 / m }')"
  done
done

declare -A med
echo "$ARCH on the CPU ($THREADS threads), batch $BATCH, median of $REPEATS runs x $ITERS iterations:"
summary="resnet_cpu: arch=$ARCH threads=$THREADS batch=$BATCH repeats=$REPEATS iterations=$ITERS"
for c in "${configs[@]}"; do
  med[$c]=$(echo "${runs[$c]}" | tr ' ' '\n' | grep . | median)
  printf '  %-18s %9.1f ms/iter  %6.2f images/s\n' "$c" "${med[$c]}" \
    "$(awk -v m="${med[$c]}" -v b="$BATCH" 'BEGIN { print b * 1000 / m }')"
  summary+=" ${c}_ms=${med[$c]}"
done
if [ "$HAVE_TORCH" = 1 ]; then
  r32=$(ratio "${med[pytorch_fp32]}" "${med[cortado_fp32]}")
  rbf=$(ratio "${med[pytorch_bf16]}" "${med[cortado_bf16]}")
  echo "  Cortado FP32 / PyTorch FP32 speed: $r32 (above 1: Cortado is faster)"
  echo "  Cortado BF16 / PyTorch autocast BF16 speed: $rbf"
  summary+=" fp32_ratio=$r32 bf16_ratio=$rbf"
fi
cortado_ratios
echo "$summary"
