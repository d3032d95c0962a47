#!/usr/bin/env bash
# LeNet on a CPU that other processes keep busy: `trainer time` (FP32 LeNet,
# batch 64, forward + backward + update) alone and beside BUSY processes that
# spin (default: one per core), in the same rounds, for each configuration:
#   default   the trainer as it runs by default (regions follow the free
#             cores, util/cpu_parallel.hpp; idle OpenMP threads spin
#             briefly, GOMP_SPINCOUNT=10000, util/openmp_spin.hpp)
#   spinning  the default with libgomp's own spin count (GOMP_SPINCOUNT=
#             300000, about 5 ms): what the brief spin saves
#   fixed     --cpu_share=0: every region on all threads, whatever
#             the load, libgomp's own spinning and the fully connected
#             GEMMs on OpenBLAS's threads (the behaviour before all three)
#   passive   fixed, with OMP_WAIT_POLICY=passive (idle OpenMP threads sleep
#             instead of spinning)
#   baseline  BASELINE_TRAINER, when set (an earlier build), as it runs by default
# Prints each run, the medians over REPEATS rounds, and per configuration the
# loaded speed as a share of the unloaded one. With B busy processes on the
# cores, LeNet's fair share of the machine is 1 / (B + 1) of it: `share` is
# loaded / (unloaded / (B + 1)), so 1 or more means the load cost LeNet no
# more than its share. Last, one key=value line (lenet_loaded: ...).
#
# Needs a build (BUILD_DIR, default build) and the Fashion-MNIST LMDBs
# (data/fashion_mnist/create.sh). Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=${TRAINER:-$BUILD_DIR/tools/trainer}
REPEATS=${REPEATS:-3}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
BUSY=${BUSY:-$(nproc)}
MODEL=models/lenet/lenet_train_test.prototxt
[ -x "$TRAINER" ] || { echo "lenet_loaded: $TRAINER not found; build first" >&2; exit 1; }
[ -d data/fashion_mnist/train_lmdb ] || { echo "lenet_loaded: data/fashion_mnist/train_lmdb missing; run data/fashion_mnist/create.sh" >&2; exit 1; }

configs=(default spinning fixed passive)
BASELINE_TRAINER=${BASELINE_TRAINER:-}
if [ -n "$BASELINE_TRAINER" ]; then
  [ -x "$BASELINE_TRAINER" ] || { echo "lenet_loaded: BASELINE_TRAINER=$BASELINE_TRAINER is not an executable" >&2; exit 1; }
  configs+=(baseline)
fi

busy_pids=()
stop_busy() {
  if [ ${#busy_pids[@]} -gt 0 ]; then
    kill "${busy_pids[@]}" 2>/dev/null || true
    wait "${busy_pids[@]}" 2>/dev/null || true  # killed: a non-zero status
  fi
  busy_pids=()
  return 0
}
start_busy() {
  for _ in $(seq 1 "$BUSY"); do
    bash -c 'while :; do :; done' &
    busy_pids+=($!)
  done
  sleep 1
}
log=$(mktemp)
trap 'stop_busy; rm -f "$log"' EXIT

# run CONFIG: prints ms per iteration of one `trainer time`.
run() {
  local bin=$TRAINER
  local -a env=() flags=()
  case $1 in
    spinning) env=(GOMP_SPINCOUNT=300000) ;;
    fixed) flags=(--cpu_share=0) ;;
    passive) env=(OMP_WAIT_POLICY=passive) flags=(--cpu_share=0) ;;
    baseline) bin=$BASELINE_TRAINER ;;
  esac
  # The settings each configuration names, none inherited from the caller.
  if ! env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT ${env[@]+"${env[@]}"} "$bin" time --model="$MODEL" --iterations="$ITERS" \
      --warmup="$WARMUP" ${flags[@]+"${flags[@]}"} >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "lenet_loaded: trainer time failed ($1)" >&2
    exit 1
  fi
  kv total_ms_median "$(grep '^time:' "$log")"
}

declare -A runs
for r in $(seq 1 "$REPEATS"); do
  for load in alone loaded; do
    [ "$load" = loaded ] && start_busy
    for c in "${configs[@]}"; do
      ms=$(run "$c")
      runs[$c.$load]+="$ms "
      printf 'run %d %-9s %-7s %8.3f ms/iter  %6.0f images/s\n' "$r" "$c" "$load" "$ms" \
        "$(awk -v m="$ms" 'BEGIN { print 64000 / m }')"
    done
    stop_busy
  done
done

echo "LeNet FP32 on the CPU ($(nproc) cores), batch 64, alone and beside $BUSY busy processes, median of $REPEATS runs x $ITERS iterations:"
summary="lenet_loaded: cores=$(nproc) busy=$BUSY repeats=$REPEATS iterations=$ITERS"
for c in "${configs[@]}"; do
  a=$(echo "${runs[$c.alone]}" | tr ' ' '\n' | grep . | median)
  l=$(echo "${runs[$c.loaded]}" | tr ' ' '\n' | grep . | median)
  ia=$(awk -v m="$a" 'BEGIN { printf "%.0f", 64000 / m }')
  il=$(awk -v m="$l" 'BEGIN { printf "%.0f", 64000 / m }')
  share=$(awk -v a="$a" -v l="$l" -v b="$BUSY" 'BEGIN { printf "%.2f", a * (b + 1) / l }')
  printf '  %-9s alone %6s images/s  loaded %6s images/s  share %s\n' "$c" "$ia" "$il" "$share"
  summary+=" ${c}_alone=$ia ${c}_loaded=$il ${c}_share=$share"
done
echo "$summary"
