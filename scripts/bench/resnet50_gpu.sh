#!/usr/bin/env bash
# ResNet-50 training on one GPU: Cortado against PyTorch, in the same run on
# the same GPU, FP16 and FP32.
#
#   Cortado FP16: trainer time on models/resnet50/train_val.prototxt with
#                 --stage=synthetic --precision=fp16 (FP16 storage, FP32 math
#                 and master weights) and the update of
#                 models/resnet50/solver.prototxt (SGD with momentum, dynamic
#                 loss scaling)
#   PyTorch AMP:  scripts/bench/resnet50_pytorch.py --precision amp
#                 (torchvision's resnet50 made ResNet v1 as Cortado's file,
#                 channels_last, cudnn.benchmark, autocast FP16 + GradScaler,
#                 SGD with momentum)
#   Cortado FP32 and PyTorch FP32: the same without FP16, and without TF32
#                 on both sides (Cortado's FP32 convolutions are FMA-only).
#   Cortado BF16 and PyTorch BF16 (PRECISIONS="bf16 ..."): --precision=bf16
#                 (FP32 master weights, no loss scaling); autocast bfloat16
#                 without a GradScaler.
# Synthetic data resident on the GPU for both: one batch of random values
# (Cortado: the synthetic stage's DummyData, drawn once by trainer time).
# An iteration is forward, backward and the optimizer step. Each run reports
# PyTorch's median of ITERS iterations timed with CUDA events (its GradScaler
# reads the overflow flag on the host every step), and Cortado's training
# loop, ITERS iterations of Solver::Step back to back over one wait (trainer
# time's loop_images_per_s; its deferred steps wait for nothing between
# displays), after WARMUP; REPEATS runs alternate
# the four configurations, and the report is the median over runs of
# images/s, with the peak GPU memory (Cortado: its caching allocator's peak;
# PyTorch: max_memory_reserved, both over the whole run) and the ratio
# Cortado / PyTorch (above 1: Cortado is faster). Then the 15 most expensive
# layers of Cortado's FP16 run: where the time goes.
#
# Environment: GPU (0; "cpu" runs Cortado on the CPU alone, a smoke test of
# this script at a tiny BATCH), PRECISIONS (the precisions to compare, from
# fp16, bf16 and fp32; default "fp16 fp32"), BATCH (256, halved until every run fits), ITERS (30),
# WARMUP (10), REPEATS (3), OTHER_BATCHES (128: Cortado alone once at each
# of these batches too; empty for none), BUILD_DIR (build-gpu, else build), PYTHON
# (python3), LOG_DIR (a temporary folder, kept and printed).
# Needs a CUDA build of Cortado and torch + torchvision for the PyTorch side;
# without them the PyTorch columns say so and the Cortado numbers still
# print. scripts/gpu_check.sh runs a shorter FP16 comparison from the GPU
# bundle, on a machine without a build.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
if [ -z "${BUILD_DIR:-}" ]; then
  BUILD_DIR=build-gpu
  [ -x "$BUILD_DIR/tools/trainer" ] || BUILD_DIR=build
fi
TRAINER=$BUILD_DIR/tools/trainer
GPU=${GPU:-0}
BATCH=${BATCH:-256}
ITERS=${ITERS:-30}
WARMUP=${WARMUP:-10}
REPEATS=${REPEATS:-3}
PYTHON=${PYTHON:-python3}
LOG_DIR=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$LOG_DIR"
[ -x "$TRAINER" ] || { echo "resnet50_gpu: $TRAINER not found; build first (scripts/build.sh)" >&2; exit 1; }


GPU_FLAG=--gpu=$GPU DEVICE=gpu$GPU
[ "$GPU" = cpu ] && GPU_FLAG="" DEVICE=cpu
HAVE_TORCH=1
if [ "$GPU" = cpu ]; then
  HAVE_TORCH=0
elif ! "$PYTHON" -c 'import torch, torchvision; assert torch.cuda.is_available()' 2>"$LOG_DIR/torch_import.log"; then
  HAVE_TORCH=0
  echo "resnet50_gpu: PyTorch with CUDA is not available to $PYTHON ($(tail -1 "$LOG_DIR/torch_import.log")); timing Cortado only"
fi

PRECISIONS=${PRECISIONS:-fp16 fp32}
declare -A solver=([cortado_fp16]=fp16 [cortado_bf16]=bf16 [cortado_fp32]=fp32)  # the --precision of each
declare -A torch_prec=([pytorch_fp16]=amp [pytorch_bf16]=bf16 [pytorch_fp32]=fp32)
configs=()
for p in $PRECISIONS; do
  [ -n "${solver[cortado_$p]:-}" ] || { echo "resnet50_gpu: PRECISIONS: unknown precision '$p' (fp16, bf16, fp32)" >&2; exit 1; }
  configs+=("cortado_$p" "pytorch_$p")
done

# One run of one configuration at batch $2: prints "ips mib", or "oom", or fails.
run_one() {
  local c=$1 b=$2 r=$3 out log=$LOG_DIR/$1_b$2_run$3.log
  case "$c" in
    cortado_*)
      if ! "$TRAINER" time --model=models/resnet50/train_val.prototxt --solver=models/resnet50/solver.prototxt \
           --stage=synthetic --precision="${solver[$c]}" --batch_size="$b" $GPU_FLAG \
           --iterations="$ITERS" --warmup="$WARMUP" >"$log" 2>&1; then
        grep -q "out of memory" "$log" && { echo oom; return 0; }
        tail -20 "$log" >&2; echo "resnet50_gpu: $c failed (log: $log)" >&2; return 1
      fi
      out=$(grep '^time:' "$log" | tail -1)
      [ "$(kv device "$out")" = "$DEVICE" ] || { echo "resnet50_gpu: trainer did not run on $DEVICE: $out" >&2; return 1; }
      # The training loop's speed (back to back, as train runs); trainers
      # from before it had only the synchronized parts' images_per_s.
      local ips; ips=$(kv loop_images_per_s "$out"); [ -n "$ips" ] || ips=$(kv images_per_s "$out")
      echo "$ips $(kv peak_mem_mib "$out")" ;;
    pytorch_*)
      set +e
      "$PYTHON" scripts/bench/resnet50_pytorch.py --precision "${torch_prec[$c]}" --batch "$b" --iters "$ITERS" \
        --warmup "$WARMUP" --device "cuda:$GPU" >"$log" 2>&1
      local rc=$?
      set -e
      [ $rc = 3 ] && { echo oom; return 0; }
      [ $rc = 0 ] || { tail -20 "$log" >&2; echo "resnet50_gpu: $c failed (log: $log)" >&2; return 1; }
      out=$(grep '^pytorch:' "$log" | tail -1)
      echo "$(kv images_per_s "$out") $(kv peak_reserved_mib "$out")" ;;
  esac
}

while :; do
  declare -A ips=() mib=()
  oom=""
  echo "ResNet-50 on GPU $GPU, batch $BATCH, $REPEATS runs x $ITERS iterations (after $WARMUP warm-up); logs: $LOG_DIR"
  for r in $(seq 1 "$REPEATS"); do
    for c in "${configs[@]}"; do
      [[ $c == pytorch_* && $HAVE_TORCH = 0 ]] && continue
      res=$(run_one "$c" "$BATCH" "$r")
      if [ "$res" = oom ]; then oom=$c; break 2; fi
      ips[$c]+="${res% *} "
      mib[$c]=${res#* }
      printf '  run %d %-13s %8s images/s  peak %8s MiB\n' "$r" "$c" "${res% *}" "${res#* }"
    done
  done
  [ -z "$oom" ] && break
  [ "$BATCH" -le 8 ] && { echo "resnet50_gpu: out of memory even at batch $BATCH ($oom)" >&2; exit 1; }
  echo "resnet50_gpu: $oom ran out of memory at batch $BATCH; retrying every configuration at $((BATCH / 2))"
  BATCH=$((BATCH / 2))
done

declare -A med=()
for c in "${configs[@]}"; do
  if [ -n "${ips[$c]:-}" ]; then med[$c]=$(echo "${ips[$c]}" | tr ' ' '\n' | grep . | median %.1f); else med[$c]=""; fi
done
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || echo "n/a"; }
echo
echo "ResNet-50 training, GPU $GPU ($(nvidia-smi --query-gpu=name --format=csv,noheader -i "$GPU" 2>/dev/null || echo unknown)), batch $BATCH, median images/s over $REPEATS runs:"
printf '  %-8s %-22s %-22s %s\n' "" "Cortado" "PyTorch" "Cortado/PyTorch"
declare -A label=([fp16]="FP16/AMP" [bf16]="BF16/AMP" [fp32]=FP32)
summary=""
for p in $PRECISIONS; do
  c=cortado_$p t=pytorch_$p
  printf '  %-8s %-22s %-22s %s\n' "${label[$p]}" \
    "${med[$c]} img/s ${mib[$c]:-?} MiB" \
    "${med[$t]:-n/a} img/s ${mib[$t]:-n/a} MiB" "$(ratio "${med[$c]}" "${med[$t]:-}")"
  # PyTorch's FP16 keys keep their name from before BF16 (pytorch_amp_*).
  tk=$t; [ $p = fp16 ] && tk=pytorch_amp
  summary+=" ${c}_ips=${med[$c]} ${tk}_ips=${med[$t]:-} ratio_$p=$(ratio "${med[$c]}" "${med[$t]:-}") ${c}_mib=${mib[$c]} ${tk}_mib=${mib[$t]:-}"
done
# Cortado alone at the other batches of OTHER_BATCHES (default 128): how its
# speed holds at a smaller batch (one run each, the first precision).
other=""
for b in ${OTHER_BATCHES-128}; do
  [ "$b" = "$BATCH" ] && continue
  res=$(run_one "${configs[0]}" "$b" 1) || continue
  if [ "$res" = oom ]; then
    echo "resnet50_gpu: ${configs[0]} ran out of memory at batch $b"
    continue
  fi
  echo "  ${configs[0]} at batch $b: ${res% *} images/s, peak ${res#* } MiB (1 run)"
  other+=" ${configs[0]}_b${b}_ips=${res% *} ${configs[0]}_b${b}_mib=${res#* }"
done

first=${configs[0]}
echo
echo "Where Cortado's ${first#cortado_} time goes (run 1, synchronized per layer):"
# sed, not head: with pipefail, head's early exit would end the script here.
sed -n '/^Layers by cost/,/^By layer type/p' "$LOG_DIR/${first}_b${BATCH}_run1.log" | sed -n '1,17p'
sed -n '/^By layer type/,/^Median iteration/p' "$LOG_DIR/${first}_b${BATCH}_run1.log"
echo "resnet50_gpu: batch=$BATCH$summary$other repeats=$REPEATS iterations=$ITERS gpu=$GPU"
