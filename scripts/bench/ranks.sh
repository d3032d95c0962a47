#!/usr/bin/env bash
# Data-parallel throughput: LeNet training on Fashion-MNIST, one process
# against RANKS MPI ranks (`mpirun -np RANKS trainer train`), each with the
# prototxt's batch of 64 (so the ranks train on RANKS * 64 images per step),
# FP32 and FP16 storage. Images/s is what the trainer logs over the last
# display interval (all ranks counted). REPEATS runs of each, alternating
# one process and the ranks so that drift hits both; prints each run, the
# medians and ranks/one (the speed-up), then one key=value line.
#
# BLAS threads: the single process gets CORES (default: all), each rank
# CORES / RANKS, so both use the same cores. On the CPU the ranks win where
# one process's layers do not use every core (small GEMMs, the layers
# without BLAS); on GPUs each rank has a device of its own.
#
# Needs a build with MPI (USE_MPI=AUTO finds Debian's Open MPI), mpirun, and
# the LMDBs (data/fashion_mnist/create.sh).
# Environment: RANKS (2), REPEATS (3), ITERS (200), CORES (nproc), GPU (empty:
# the CPU; `all` gives each rank a device).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=$BUILD_DIR/tools/trainer
RANKS=${RANKS:-2}
REPEATS=${REPEATS:-3}
ITERS=${ITERS:-200}
CORES=${CORES:-$(nproc)}
[ -x "$TRAINER" ] || { echo "ranks: $TRAINER not found; build first" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "ranks: mpirun not found (Debian: openmpi-bin)" >&2; exit 1; }
[ -d data/fashion_mnist/train_lmdb ] || { echo "ranks: run data/fashion_mnist/create.sh first" >&2; exit 1; }
per_rank=$(( CORES / RANKS > 0 ? CORES / RANKS : 1 ))
gpu_flag=()
[ -n "${GPU:-}" ] && gpu_flag=(--gpu="$GPU")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The solver without tests or snapshots, two display intervals: the second
# is the measurement (the first holds start-up). The precision is the
# trainer's --precision.
grep -v -E '^(test_iter|test_interval|display|max_iter|snapshot|snapshot_prefix):' models/lenet/solver.prototxt \
  >"$work/solver.prototxt"
printf 'max_iter: %d\ndisplay: %d\nsnapshot: 0\nsnapshot_after_train: false\n' "$ITERS" $(( ITERS / 2 )) \
  >>"$work/solver.prototxt"

# last_ips LOG: the images/s of the last display interval.
last_ips() { grep -o '[0-9.e+]* images/s' "$1" | tail -1 | cut -d' ' -f1; }
run() {  # run KIND PRECISION -> images/s
  local log=$work/log
  if [ "$1" = one ]; then
    OPENBLAS_NUM_THREADS=$CORES GLOG_logtostderr=1 "$TRAINER" train --solver="$work/solver.prototxt" \
      --precision="$2" "${gpu_flag[@]}" >"$log" 2>&1
  else
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none -np "$RANKS" \
      -x OPENBLAS_NUM_THREADS=$per_rank -x GLOG_logtostderr=1 \
      "$TRAINER" train --solver="$work/solver.prototxt" --precision="$2" "${gpu_flag[@]}" >"$log" 2>&1
  fi || { tail -20 "$log" >&2; echo "ranks: the $1 $2 run failed" >&2; exit 1; }
  last_ips "$log"
}

declare -A ips
for p in fp32 fp16; do ips[one_$p]=""; ips[ranks_$p]=""; done
for r in $(seq 1 "$REPEATS"); do
  for p in fp32 fp16; do
    for k in one ranks; do
      v=$(run $k $p)
      ips[${k}_$p]+="$v "
      printf 'run %d %s %-5s: %s images/s\n' "$r" "$p" "$k" "$v"
    done
  done
done
line="ranks: ranks=$RANKS cores=$CORES iters=$ITERS repeats=$REPEATS"
for p in fp32 fp16; do
  one=$(echo "${ips[one_$p]}" | tr ' ' '\n' | grep . | median %.1f)
  many=$(echo "${ips[ranks_$p]}" | tr ' ' '\n' | grep . | median %.1f)
  speedup=$(awk -v a="$many" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
  echo "LeNet $p, median images/s: one process $one, $RANKS ranks $many (ranks/one = $speedup)"
  line+=" ${p}_one=$one ${p}_ranks=$many ${p}_speedup=$speedup"
done
echo "$line"
