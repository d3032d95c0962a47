#!/usr/bin/env bash
# Peak memory of `trainer time` on the CPU: this build's trainer against
# another build's (BASELINE_TRAINER, required), alternating, REPEATS rounds,
# medians of the process's peak resident set (trainer time's peak_mem_mib)
# and their ratio. Default: ResNet-50 with FP16 storage at batch 8.
#
#   BASELINE_TRAINER=<an earlier build's trainer> bash scripts/bench/memory_cpu.sh
#
# Environment: MODEL (models/resnet50/train_val.prototxt, run in its
# synthetic stage), PRECISION (fp16), BATCH (8), ITERS (2), WARMUP (1),
# REPEATS (3), TRAINER (build/tools/trainer). Both trainers get the same
# flags, so the baseline must know --precision; both should be built alike
# (both with or both without CUDA: the CUDA libraries alone add about 150 MiB
# to the resident set).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
MODEL=${MODEL:-models/resnet50/train_val.prototxt}
PRECISION=${PRECISION:-fp16}
BATCH=${BATCH:-8}
ITERS=${ITERS:-2}
WARMUP=${WARMUP:-1}
REPEATS=${REPEATS:-3}
TRAINER=${TRAINER:-build/tools/trainer}
[ -n "${BASELINE_TRAINER:-}" ] || { echo "memory_cpu: set BASELINE_TRAINER to another build's trainer" >&2; exit 1; }
for t in "$TRAINER" "$BASELINE_TRAINER"; do
  [ -x "$t" ] || { echo "memory_cpu: $t: not an executable trainer" >&2; exit 1; }
done
[ -f "$MODEL" ] || { echo "memory_cpu: $MODEL: no such model" >&2; exit 1; }
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
declare -A runs=([cortado]="" [baseline]="")
declare -A bin=([cortado]="$TRAINER" [baseline]="$BASELINE_TRAINER")
for r in $(seq "$REPEATS"); do
  for who in cortado baseline; do
    if ! "${bin[$who]}" time --model="$MODEL" --stage=synthetic --precision="$PRECISION" --batch_size="$BATCH" --iterations="$ITERS" --warmup="$WARMUP" \
         >"$log/$who.$r" 2>&1 || ! line=$(grep '^time:' "$log/$who.$r"); then
      tail -20 "$log/$who.$r" >&2
      echo "memory_cpu: trainer time failed for $who (${bin[$who]})" >&2
      exit 1
    fi
    mib=$(kv peak_mem_mib "$line")
    runs[$who]+="$mib "
    echo "round $r: $who peak $mib MiB, $(kv total_ms_median "$line") ms/iter"
  done
done
c=$(echo "${runs[cortado]}" | tr ' ' '\n' | grep . | median %.1f)
b=$(echo "${runs[baseline]}" | tr ' ' '\n' | grep . | median %.1f)
echo "$MODEL ($PRECISION), batch $BATCH: peak resident memory, medians of $REPEATS: Cortado $c MiB, baseline $b MiB," \
     "Cortado / baseline = $(ratio "$c" "$b")"
echo "memory: model=$MODEL precision=$PRECISION batch=$BATCH cortado_mib=$c baseline_mib=$b ratio=$(ratio "$c" "$b")"
