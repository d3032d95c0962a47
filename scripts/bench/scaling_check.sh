#!/usr/bin/env bash
# Checks scripts/bench/scaling_model.py against what this machine can
# measure: the step time of CPU ranks training under `mpirun -np R` (R in
# RANKS), against the model's prediction from
#   - the compute, measured under the same sharing of the cores: R
#     `trainer time` runs at once, one OpenMP thread each, as the R ranks
#     run (the model averages their logs);
#   - the link: the MPI engine's all-reduce measured against the message
#     size (scaling_link.cpp, built here with mpicxx), fitted to the ring
#     formula, plus the engine's packing copies. The benchmark calls MPI as
#     the engine does (LINK_MODE): `gated`, a polled MPI_Ibarrier then a
#     blocking MPI_Allreduce, as src/cortado/comm/mpi_communicator.cpp does
#     where its Gate() waits for the ranks (the default then); `polled`,
#     MPI_Iallreduce completed by polling MPI_Test (the engine before its
#     gate); or `blocking` MPI_Allreduce. One other mode is measured too, and
#     its prediction printed beside.
# The MPI engine sums on the host, synchronously, once per gradient type
# after backward, so the prediction compared is the model's "no overlap".
#
# The net: DummyData into four fully connected layers (1024-2048-2048-2048-
# 1000, 12.5 M FP32 parameters, 50 MB of gradients) at batch BATCH per
# rank: its sums take about as long as its compute, so both must be right.
#
# Each of REPEATS rounds measures, for each R: the R `trainer time` runs, the
# training run (the step from the images/s the trainer logs at each display,
# all ranks counted: step = R * BATCH / images/s; the first display, which
# holds the start, left out; the median of the rest) and the link. Prints
# each round, then the medians and the model's error in percent, then one
# key=value line. Run it on an idle machine (no compiler running): other
# load moves both numbers.
#
# Needs a build with MPI (USE_MPI=AUTO finds Debian's Open MPI), mpirun and
# mpicxx (Debian: openmpi-bin, libopenmpi-dev).
# Environment: RANKS ("2 4"), REPEATS (3), BATCH (16), ITERS (70: training
# iterations, a display every 10), TIME_ITERS (20), LINK_MODE (gated, blocking
# or polled; default: as the source), BUILD_DIR (build), KEEP (a folder to keep
# the logs in).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=$BUILD_DIR/tools/trainer
RANKS=${RANKS:-2 4}
REPEATS=${REPEATS:-3}
BATCH=${BATCH:-16}
ITERS=${ITERS:-70}
DISPLAY=10
TIME_ITERS=${TIME_ITERS:-20}
if [ -z "${LINK_MODE:-}" ]; then
  LINK_MODE=blocking
  if grep -q 'Gate("a sum")' src/cortado/comm/mpi_communicator.cpp; then
    LINK_MODE=gated
  elif grep -q MPI_Iallreduce src/cortado/comm/mpi_communicator.cpp; then
    LINK_MODE=polled
  fi
fi
case $LINK_MODE in
  blocking) OTHER_MODE=polled ;;
  polled) OTHER_MODE=blocking ;;
  gated) OTHER_MODE=polled ;;
  *) echo "scaling_check: LINK_MODE=$LINK_MODE: gated, blocking or polled" >&2; exit 1 ;;
esac
[ -x "$TRAINER" ] || { echo "scaling_check: $TRAINER not found; build first" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "scaling_check: mpirun not found (Debian: openmpi-bin)" >&2; exit 1; }
command -v mpicxx >/dev/null || { echo "scaling_check: mpicxx not found (Debian: libopenmpi-dev)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe --bind-to none)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicxx -O2 -std=c++17 scripts/bench/scaling_link.cpp -o "$work/scaling_link"

ip() {  # ip NAME BOTTOM OUTPUTS
  printf 'layer { name: "%s" type: "InnerProduct" bottom: "%s" top: "%s"\n' "$1" "$2" "$1"
  printf '  inner_product_param { num_output: %d weight_filler { type: "xavier" } } }\n' "$3"
}
{
  echo 'name: "ScalingCheck"'
  echo 'layer { name: "data" type: "DummyData" top: "data" top: "label"'
  echo "  dummy_data_param { shape { dim: $BATCH dim: 1024 } shape { dim: $BATCH }"
  echo '    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 3 } } }'
  ip ip1 data 2048
  echo 'layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }'
  ip ip2 ip1 2048
  echo 'layer { name: "relu2" type: "ReLU" bottom: "ip2" top: "ip2" }'
  ip ip3 ip2 2048
  echo 'layer { name: "relu3" type: "ReLU" bottom: "ip3" top: "ip3" }'
  ip ip4 ip3 1000
  echo 'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip4" bottom: "label" top: "loss" }'
} >"$work/net.prototxt"
cat >"$work/solver.prototxt" <<EOF
net: "$work/net.prototxt"
type: "SGD"
base_lr: 0.001
momentum: 0.9
weight_decay: 0.0001
lr_policy: "fixed"
max_iter: $ITERS
display: $DISPLAY
snapshot: 0
snapshot_after_train: false
solver_mode: CPU
random_seed: 1
EOF

# step_ms LOG RANKS: the median step of the displays after the first.
step_ms() {
  grep -o '[0-9.e+]* images/s' "$1" | cut -d' ' -f1 | tail -n +2 |
    awk -v r="$2" -v b="$BATCH" '{ print r * b * 1000 / $1 }' | median %.4f
}

declare -A predicted other measured compute
summary="scaling_check: batch=$BATCH iters=$ITERS repeats=$REPEATS link_mode=$LINK_MODE"
for round in $(seq 1 "$REPEATS"); do
  for r in $RANKS; do
    tag=$r.$round
    # The compute: r single-threaded `trainer time` runs at once.
    pids=()
    for k in $(seq 1 "$r"); do
      OMP_NUM_THREADS=1 GLOG_logtostderr=1 "$TRAINER" time --solver="$work/solver.prototxt" \
        --iterations="$TIME_ITERS" --warmup=3 >"$work/time.$tag.$k.log" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do
      wait "$pid" || { tail -20 "$work/time.$tag.1.log" >&2; echo "scaling_check: trainer time failed" >&2; exit 1; }
    done
    # The ranks.
    if ! "${MPIRUN[@]}" -np "$r" -x OMP_NUM_THREADS=1 -x GLOG_logtostderr=1 \
        "$TRAINER" train --solver="$work/solver.prototxt" >"$work/train.$tag.log" 2>&1; then
      tail -20 "$work/train.$tag.log" >&2
      echo "scaling_check: mpirun -np $r trainer train failed" >&2
      exit 1
    fi
    # The link, called as the engine calls MPI, then the other way.
    for mode in $LINK_MODE $OTHER_MODE; do
      "${MPIRUN[@]}" -np "$r" "$work/scaling_link" $((64 << 20)) 9 "$mode" >"$work/link.$tag.$mode.txt" 2>&1 ||
        { cat "$work/link.$tag.$mode.txt" >&2; echo "scaling_check: the link benchmark failed" >&2; exit 1; }
      python3 scripts/bench/scaling_model.py "$work"/time."$tag".*.log --link-fit "$work/link.$tag.$mode.txt" \
        --ranks "$r" >"$work/model.$tag.$mode.txt"
    done
    cp "$work/model.$tag.$LINK_MODE.txt" "$work/model.$tag.txt"
    line=$(grep '^scaling: ' "$work/model.$tag.txt")
    p=$(kv no_overlap_ms "$line")
    o=$(kv no_overlap_ms "$(grep '^scaling: ' "$work/model.$tag.$OTHER_MODE.txt")")
    m=$(step_ms "$work/train.$tag.log" "$r")
    c=$(grep -m1 '^Compute of one rank' "$work/model.$tag.txt" | sed 's/.*step \([0-9.]*\) ms.*/\1/')
    l=$(grep -m1 '^Link: ' "$work/model.$tag.txt" | sed 's/^Link: measured: //')
    predicted[$r]+="$p "
    other[$r]+="$o "
    measured[$r]+="$m "
    compute[$r]+="$c "
    printf 'round %d, %d ranks: measured step %.2f ms; predicted %.2f ms (compute %.2f ms measured, %s link %s; %s link: %.2f ms)\n' \
      "$round" "$r" "$m" "$p" "$c" "$LINK_MODE" "$l" "$OTHER_MODE" "$o"
  done
done

for r in $RANKS; do
  p=$(echo "${predicted[$r]}" | tr ' ' '\n' | grep . | median %.4f)
  m=$(echo "${measured[$r]}" | tr ' ' '\n' | grep . | median %.4f)
  c=$(echo "${compute[$r]}" | tr ' ' '\n' | grep . | median %.4f)
  o=$(echo "${other[$r]}" | tr ' ' '\n' | grep . | median %.4f)
  err=$(awk -v p="$p" -v m="$m" 'BEGIN { printf "%+.1f", 100 * (p - m) / m }')
  oerr=$(awk -v p="$o" -v m="$m" 'BEGIN { printf "%+.1f", 100 * (p - m) / m }')
  printf '%d ranks, medians of %d rounds: measured step %.2f ms, predicted %.2f ms (error %s%%); compute alone %.2f ms, so communication measured %.2f ms, predicted %.2f ms; with the %s link the prediction would be %.2f ms (%s%%)\n' \
    "$r" "$REPEATS" "$m" "$p" "$err" "$c" "$(awk -v a="$m" -v b="$c" 'BEGIN { print a - b }')" \
    "$(awk -v a="$p" -v b="$c" 'BEGIN { print a - b }')" "$OTHER_MODE" "$o" "$oerr"
  summary+=" np${r}_measured_ms=$m np${r}_predicted_ms=$p np${r}_error_pct=$err np${r}_compute_ms=$c"
  summary+=" np${r}_${OTHER_MODE}_predicted_ms=$o"
done
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.log "$work"/*.txt "$KEEP"/; fi
echo "$summary"
