#!/usr/bin/env bash
# The GPU check: one command on a machine with an NVIDIA GPU, run from the
# bundle that scripts/gpu_bundle.sh packs on a build machine. Nothing is
# built here; the machine needs bash, coreutils, ldd, xz (or python3), the
# NVIDIA driver and the CUDA libraries the bundle names (cudart, cuBLAS,
# cuDNN, NCCL: a CUDA installation or the nvidia-* pip wheels of python3).
#
#   bash .gpu_bundle/gpu_check.sh [options]     (carried bundle folder)
#   bash scripts/gpu_check.sh [options]         (in a repository with .gpu_bundle/)
#
# Stages, in this order, each with a time limit and all of them within
# DEADLINE (470 s) of the start, so that one call fits in 8 minutes:
#   0. unpacks cortado_gpu.tar.xz beside itself (again only when it changed),
#      finds the CUDA libraries and checks with ldd that the executables load:
#      a library not found ends the check in its first seconds, named
#   a. the whole test suite (cortado_tests, GPU cases included) in JOBS
#      processes, sharded with GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX
#      (TEST_TIMEOUT, 180 s)
#   c. LeNet FP32 and FP16 `trainer time --gpu` (DummyData, batch 64; 3 runs
#      of 200 iterations each, alternating; medians)
#   d. ResNet-50 FP16 at batch 256 (RESNET_BATCH): Cortado's models/resnet50
#      and models/resnet50_nvcaffe train_val nets (--stage=synthetic: random
#      data drawn once, --precision=fp16) with their solver's update, and
#      PyTorch AMP channels_last on the same ResNet v1
#      (scripts/bench/resnet50_pytorch.py, run first), 5 warm-up and 20 timed
#      iterations each: images/s and peak memory (RESNET_TIMEOUT, 120 s a run);
#      then resnet50_nvcaffe again with fuse_layers: false, the gain of the
#      layer fusion (BatchNorm + ReLU, Eltwise SUM + ReLU in one pass), and
#      with the trainer's switch --channels_last=1 (channels last,
#      net_layout.hpp), then with --cudnn_batch_norm=1 (cuDNN's NHWC
#      BatchNorm), --cudnn_api=graph (cuDNN's graph API) or
#      --cudnn_pad_channels=4 (conv1's 3 channels padded) as well, and with
#      all of them (RESNET_NETS names
#      the runs and their order; the default is all of them). Each run also
#      reports its final losses, its skipped updates and which engines its
#      layers ran on (BatchNorms on cuDNN forward and backward, convolution
#      passes on graph-API plans, padded convolutions, channels-last blobs:
#      net_engines.hpp); a run whose loss is not finite, that skipped an
#      update, or whose switch no layer took is BROKEN in the summary (and
#      the stage fails), not a time. RESNET_ITERS and RESNET_WARMUP change
#      the 20 and 5
#   g. ResNet-50 learns: scripts/bench/resnet50_train_check.sh (both
#      ResNet-50 files, 200 iterations at batch 32 on real JPEGs, the loss
#      must fall below 0.75 of its first value) on the LMDB in TRAIN_DATA
#      (default: .gpu_data beside the bundle folder, made on the build
#      machine with PREPARE_ONLY=1 WORK_DIR=.gpu_data; SKIPPED without it;
#      TRAIN_TIMEOUT, 150 s)
#   f. nvJPEG: images/s of bin/nvjpeg_decode (data/nvjpeg_batch.hpp) at batch
#      NVJPEG_BATCH (256), FP16, random-resized crop 224 + mirror + mean, over
#      1,024 ImageNet-like JPEGs made by scripts/bench/imagenet_jpegs.py
#      (python3 with numpy and PIL), 3 runs of 20 batches after 3; SKIPPED
#      where nvJPEG cannot be loaded (the bundle carries a libnvjpeg when it
#      was packed with NVJPEG_LIB)
#   b. compute-sanitizer memcheck on one iteration (after one warm-up) of
#      `trainer time` on models/resnet50/train_val.prototxt (synthetic, FP16) at
#      batch 8 (MEMCHECK_TIMEOUT, 240 s, or what is left), with the trainer
#      flags of MEMCHECK_FLAGS (say "--channels_last=1 --cudnn_batch_norm=1"
#      for the channels-last paths) and the VAR=value words of MEMCHECK_ENV
#      in its environment; SKIPPED where
#      compute-sanitizer is not found. Last, as its time is the hardest to
#      foresee (cuDNN's algorithm search runs under the sanitizer too)
#   e. a summary of a dozen lines, printed last and written to
#      $OUT/gpu_check_summary.txt (OUT unset: the bundle's folder); the logs
#      go to gpu_check_logs/ beside it, packed with the summary as
#      gpu_check_logs.tar.xz
#
# GPU=cpu tries the plan on a machine without a GPU: stage d on the CPU at
# batch 2, 1 + 2 iterations (RESNET_* override), judged as on a GPU (the
# channels-last, cuDNN and padding switches take no layer on the CPU, so
# their runs show as BROKEN: what a GPU run that fell back everywhere would
# show); the GPU-only stages skip.
#
# Options: --no-tests, --no-memcheck, --no-lenet, --no-resnet, --no-train, --no-nvjpeg
# (skip a stage), --no-bench (skip c, d, g and f), so that a second call reruns only what failed;
# --tests=FILTER (a gtest filter for stage a; default every case).
# Environment: GPU (0; cpu: the dry run above), JOBS (test processes: half the cores, at most 8), OUT,
# TEST_TIMEOUT, MEMCHECK_TIMEOUT, MEMCHECK_FLAGS, MEMCHECK_ENV, RESNET_TIMEOUT, TRAIN_TIMEOUT, DEADLINE, RESNET_BATCH (256), RESNET_ITERS (20), RESNET_WARMUP (5), RESNET_NETS, TRAIN_DATA,
# NVJPEG_BATCH (256),
# PYTHON (python3), CUDA_HOME (searched first for the CUDA libraries),
# WORK_DIR (where the archive is unpacked: beside it, else a temporary folder).
#
# Exit status: 0 every stage that ran passed on a GPU; 1 a stage failed (or
# the bundle cannot load); 2 no GPU found: the tests ran (their GPU cases
# skip) and the GPU stages did not.
set -uo pipefail
export LC_ALL=C
T0=$(date +%s)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ARCHIVE_NAME=cortado_gpu.tar.xz

RUN_TESTS=1 RUN_MEMCHECK=1 RUN_LENET=1 RUN_RESNET=1 RUN_NVJPEG=1 RUN_TRAIN=1 TEST_FILTER=""
for a in "$@"; do
  case "$a" in
    --no-tests) RUN_TESTS=0 ;;
    --no-memcheck) RUN_MEMCHECK=0 ;;
    --no-lenet) RUN_LENET=0 ;;
    --no-resnet) RUN_RESNET=0 ;;
    --no-nvjpeg) RUN_NVJPEG=0 ;;
    --no-train) RUN_TRAIN=0 ;;
    --no-bench) RUN_LENET=0 RUN_RESNET=0 RUN_NVJPEG=0 RUN_TRAIN=0 ;;
    --tests=*) TEST_FILTER=${a#--tests=} ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d'; exit 0 ;;
    *) echo "gpu_check: unknown option $a (see --help)" >&2; exit 1 ;;
  esac
done
GPU=${GPU:-0}
PYTHON=${PYTHON:-python3}
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
MEMCHECK_TIMEOUT=${MEMCHECK_TIMEOUT:-240}
RESNET_TIMEOUT=${RESNET_TIMEOUT:-120}
TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-150}
DEADLINE=${DEADLINE:-470}
# GPU=cpu: a dry run of the check on this machine's CPU (stage d at a small
# batch, its runs judged as on a GPU; the GPU-only stages skip), to try the
# plan before a GPU lease is spent on it.
if [ "$GPU" = cpu ]; then
  RESNET_BATCH=${RESNET_BATCH:-2} RESNET_ITERS=${RESNET_ITERS:-2} RESNET_WARMUP=${RESNET_WARMUP:-1}
fi
RESNET_BATCH=${RESNET_BATCH:-256}
RESNET_ITERS=${RESNET_ITERS:-20}
RESNET_WARMUP=${RESNET_WARMUP:-5}
NVJPEG_BATCH=${NVJPEG_BATCH:-256}
# Stage d's Cortado runs: the net's folder (resnet50_nvcaffe for its
# variants) and the trainer's switches of each (switches.hpp).
declare -A RESNET_FLAGS=(
  [resnet50]="" [resnet50_nvcaffe]="" [resnet50_nvcaffe_unfused]=""
  [resnet50_nvcaffe_nhwc]="--channels_last=1"
  [resnet50_nvcaffe_nhwc_bn]="--channels_last=1 --cudnn_batch_norm=1"
  [resnet50_nvcaffe_nhwc_graph]="--channels_last=1 --cudnn_api=graph"
  [resnet50_nvcaffe_nhwc_pad]="--channels_last=1 --cudnn_pad_channels=4"
  [resnet50_nvcaffe_nhwc_all]="--channels_last=1 --cudnn_batch_norm=1 --cudnn_api=graph --cudnn_pad_channels=4"
)
# The default order puts first what a short lease must not lose: the
# default net, every switch on, then the variants one by one.
RESNET_NETS=${RESNET_NETS:-resnet50 resnet50_nvcaffe resnet50_nvcaffe_nhwc_all resnet50_nvcaffe_nhwc resnet50_nvcaffe_nhwc_bn resnet50_nvcaffe_nhwc_graph resnet50_nvcaffe_nhwc_pad resnet50_nvcaffe_unfused}
for net in $RESNET_NETS; do
  [ -n "${RESNET_FLAGS[$net]+x}" ] || { echo "gpu_check: RESNET_NETS names $net; known: ${!RESNET_FLAGS[*]}" >&2; exit 1; }
done

say() { echo "gpu_check: $*"; }
die() { echo "gpu_check: error: $*" >&2; exit 1; }
elapsed() { echo $(( $(date +%s) - T0 )); }
# limit N: N seconds, or what is left before DEADLINE if that is less.
limit() { local left=$(( DEADLINE - $(date +%s) + T0 )); echo $(( left < $1 ? (left > 0 ? left : 1) : $1 )); }

# ---- 0. the bundle ----------------------------------------------------------------
# ROOT: the unpacked bundle (bin/, lib/, models/, tests/, scripts/).
if [ -x "$HERE/bin/trainer" ]; then
  ROOT=$HERE BUNDLE=$HERE
else
  BUNDLE=""
  for d in "$HERE" "$HERE/../.gpu_bundle"; do
    [ -f "$d/$ARCHIVE_NAME" ] && { BUNDLE=$(cd "$d" && pwd); break; }
  done
  [ -n "$BUNDLE" ] || die "no $ARCHIVE_NAME beside this script (nor in ../.gpu_bundle): run scripts/gpu_bundle.sh on a build machine and carry .gpu_bundle/"
  work=${WORK_DIR:-$BUNDLE}
  if ! { mkdir -p "$work" && [ -w "$work" ]; }; then work=${TMPDIR:-/tmp}/cortado_gpu_$(id -u); mkdir -p "$work"; fi
  ROOT=$work/cortado_gpu
  if [ ! -f "$ROOT/.unpacked" ] || [ "$BUNDLE/$ARCHIVE_NAME" -nt "$ROOT/.unpacked" ]; then
    rm -rf "$ROOT"
    if command -v xz >/dev/null; then
      tar -xJf "$BUNDLE/$ARCHIVE_NAME" -C "$work" || die "cannot unpack $BUNDLE/$ARCHIVE_NAME"
    else
      "$PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$BUNDLE/$ARCHIVE_NAME" "$work" || die "cannot unpack $BUNDLE/$ARCHIVE_NAME (no xz; python3's tarfile failed)"
    fi
    touch "$ROOT/.unpacked"
    say "unpacked $BUNDLE/$ARCHIVE_NAME into $ROOT ($(elapsed) s)"
  fi
fi
[ -x "$ROOT/bin/trainer" ] || die "$ROOT/bin/trainer missing: a broken bundle"
cd "$ROOT"
REPORT_DIR=${OUT:-$BUNDLE}
LOG_DIR=$REPORT_DIR/gpu_check_logs
mkdir -p "$LOG_DIR" || die "cannot write $LOG_DIR"
SUMMARY_FILE=$REPORT_DIR/gpu_check_summary.txt
LOG_ARCHIVE=$REPORT_DIR/gpu_check_logs.tar.xz
BINS=("$ROOT"/bin/*)
say "bundle: $(sed -n 's/^commit: //p' MANIFEST), built $(sed -n 's/^built: //p' MANIFEST); CUDA libraries needed: $(sed -n 's/^cuda_libraries: //p' MANIFEST)"

# ---- 0. the CUDA libraries -----------------------------------------------------------
# Candidate folders: a CUDA installation, then the pip wheels (nvidia/*/lib)
# of python3's site-packages. Only the folders that hold a library ldd misses
# go on LD_LIBRARY_PATH, after the bundle's lib/; the library path is set for
# Cortado's programs alone (PyTorch keeps its own environment).
candidates=()
for c in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-*; do
  [ -n "$c" ] || continue
  for d in "$c/lib64" "$c/lib" "$c/targets/x86_64-linux/lib"; do [ -d "$d" ] && candidates+=("$d"); done
done
if command -v "$PYTHON" >/dev/null; then
  while IFS= read -r d; do [ -d "$d" ] && candidates+=("$d"); done < <("$PYTHON" - 2>/dev/null <<'EOF'
import glob, os, site, sys
roots = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
seen = set()
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))) + sorted(glob.glob(os.path.join(r, "nvidia", "cu*", "lib*"))):
        d = os.path.realpath(d)
        if d not in seen:
            seen.add(d)
            print(d)
EOF
)
fi
LIBPATH=$ROOT/lib cuda_dirs=""
# What ldd does not find, one line per executable and problem.
ldd_problems() {
  for b in "${BINS[@]}"; do
    LD_LIBRARY_PATH=$LIBPATH ldd "$b" 2>&1 | grep 'not found' | sed "s|^[[:space:]]*|  $(basename "$b"): |"
  done | sort -u
}
for round in 1 2 3 4 5 6; do
  problems=$(ldd_problems)
  [ -z "$problems" ] && break
  added=0
  # The bundle's libstdc++ and libgcc_s only where the machine's are missing
  # or older than the build machine's.
  if echo "$problems" | grep -qE 'GLIBCXX_|CXXABI_|GCC_[0-9]|libstdc\+\+|libgcc_s' &&
     [[ ":$LIBPATH:" != *":$ROOT/lib/cxx:"* ]]; then
    LIBPATH+=":$ROOT/lib/cxx" added=1
  fi
  for m in $(echo "$problems" | awk '$3 == "=>" { print $2 }' | sort -u); do
    for d in "${candidates[@]}"; do
      if [ -e "$d/$m" ]; then
        [[ ":$LIBPATH:" == *":$d:"* ]] || { LIBPATH+=":$d" cuda_dirs+="${cuda_dirs:+ }$d" added=1; }
        break
      fi
    done
  done
  [ $added = 1 ] || break
done
problems=$(ldd_problems)
if [ -n "$problems" ]; then
  echo "$problems" >&2
  echo "gpu_check: searched: ${candidates[*]:-(no CUDA installation or nvidia pip wheels found)}" >&2
  cuda_major=$(sed -n 's/^cuda_libraries: .*libcudart\.so\.\([0-9]*\).*/\1/p' MANIFEST)
  die "the bundle cannot load on this machine (above: what ldd does not find). For a CUDA library: set CUDA_HOME to a CUDA ${cuda_major:-} installation that has it, or install the pip wheels that ship it (nvidia-cuda-runtime, nvidia-cublas, nvidia-cudnn, nvidia-nccl for CUDA ${cuda_major:-?}) for $PYTHON. A glibc 'version not found' needs glibc $(sed -n 's/^glibc_needed: \([0-9.]*\).*/\1/p' MANIFEST) or newer"
fi
[ -n "$cuda_dirs" ] || cuda_dirs="the system's library paths"
cxx_note="the machine's libstdc++"
[[ ":$LIBPATH:" == *":$ROOT/lib/cxx:"* ]] && cxx_note="the bundle's libstdc++ (lib/cxx)"
say "every library resolves; CUDA libraries from $cuda_dirs; $cxx_note ($(elapsed) s)"
# Cortado's programs run with these, and so do the tools the tests start:
# the tests' data folder and tools are the bundle's (tools.env:
# CORTADO_TRAINER=bin/trainer ...).
cortado_env=(env "LD_LIBRARY_PATH=$LIBPATH" "CORTADO_TEST_DATA_DIR=$ROOT/tests")
while IFS== read -r var rel; do
  [ -n "$var" ] && cortado_env+=("$var=$ROOT/$rel")
done <tools.env
TRAINER=$ROOT/bin/trainer

# ---- the GPU -----------------------------------------------------------------------------
HAVE_GPU=0 GPU_NAME="none" DRIVER=""
if [ "$GPU" = cpu ]; then
  say "GPU=cpu: a dry run on the CPU (stage d at batch $RESNET_BATCH, $RESNET_WARMUP + $RESNET_ITERS iterations; the GPU-only stages skip)"
elif command -v nvidia-smi >/dev/null && q=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null) && [ -n "$q" ]; then
  line=$(echo "$q" | sed -n "$((GPU + 1))p")
  [ -n "$line" ] || die "GPU=$GPU, but nvidia-smi lists $(echo "$q" | wc -l) device(s)"
  HAVE_GPU=1
  GPU_NAME=$(echo "$line" | cut -d, -f1 | sed 's/ *$//')
  GPU_MEM=$(echo "$line" | cut -d, -f2 | sed 's/^ *//')
  DRIVER=$(echo "$line" | cut -d, -f3 | tr -d ' ')
  say "GPU $GPU: $GPU_NAME, $GPU_MEM, driver $DRIVER"
else
  say "NO NVIDIA GPU FOUND (nvidia-smi missing or lists no device): running the tests (their GPU cases skip); the GPU stages are SKIPPED"
fi
CORES=$(nproc)
# Test processes: half the cores (at most 8), two OpenMP threads each, so
# that the CPU layers' threaded paths run too; all cores on a small machine.
if [ "$CORES" -ge 4 ]; then JOBS=${JOBS:-$(( CORES / 2 < 8 ? CORES / 2 : 8 ))}; else JOBS=${JOBS:-$CORES}; fi

declare -A result=() resnet_ips=() resnet_loop=()  # result: stage -> PASS / FAIL
failed=0

# ---- a. tests -------------------------------------------------------------------------------
tests_line="not run (--no-tests)"
if [ $RUN_TESTS = 1 ]; then
  tlimit=$(limit "$TEST_TIMEOUT")
  say "a. tests: cortado_tests in $JOBS shards${TEST_FILTER:+, filter $TEST_FILTER}, limit $tlimit s (logs: $LOG_DIR/tests_*.log)"
  ts=$(date +%s)
  tmp_root=$(mktemp -d)
  rm -f "$LOG_DIR"/tests_*.log  # an earlier call's shards
  pids=()
  # The CPU layers' OpenMP threads: the cores shared among the shards.
  threads=$(( CORES / JOBS > 0 ? CORES / JOBS : 1 ))
  for i in $(seq 0 $((JOBS - 1))); do
    mkdir -p "$tmp_root/$i"
    TMPDIR=$tmp_root/$i OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads GTEST_TOTAL_SHARDS=$JOBS GTEST_SHARD_INDEX=$i \
      timeout -k 10 "$tlimit" "${cortado_env[@]}" "$ROOT/bin/cortado_tests" --gtest_color=no \
      ${TEST_FILTER:+--gtest_filter="$TEST_FILTER"} >"$LOG_DIR/tests_$i.log" 2>&1 &
    pids+=($!)
  done
  timed_out=""
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    case $rc in 0) ;; 124|137) timed_out+=" $i" ;; esac
  done
  rm -rf "$tmp_root"
  # One line per finished case: "[       OK ] Suite.Name (12 ms)".
  count() { cat "$LOG_DIR"/tests_*.log | grep -cE "^\[ +$1 +\] .* \([0-9]+ ms\)\$"; }
  passed=$(count OK) failed_n=$(count FAILED) skipped=$(count SKIPPED)
  started=$(cat "$LOG_DIR"/tests_*.log | grep -cE '^\[ RUN +\] ')
  crashed=$((started - passed - failed_n - skipped))
  total=$started
  cat "$LOG_DIR"/tests_*.log | grep -E '^\[ +FAILED +\] .* \([0-9]+ ms\)$' | sed -E 's/^\[ +FAILED +\] //; s/, where .*//; s/ \([0-9]+ ms\)$//' >"$LOG_DIR/tests_failed.txt"
  # Why cases skipped (the first skip message of each skipped case), most
  # frequent first.
  reasons=$(cat "$LOG_DIR"/tests_*.log | awk '
      /^\[ RUN +\] / { name = $4; why = "" }
      /: Skipped$/ { if (why == "" && (getline line) > 0) why = line }
      /^\[ +SKIPPED +\] .* \([0-9]+ ms\)$/ { n[why == "" ? "(no message)" : why]++ }
      END { for (w in n) print n[w] "\t" w }' | sort -rn | head -3 |
      awk -F'\t' '{ printf "%s%d %s", (NR > 1 ? "; " : ""), $1, $2 }')
  gpu_named=$(cat "$LOG_DIR"/tests_*.log | grep -cE '^\[ +OK +\] [^ ]*(Gpu|GPU|Cuda|CUDA|Cudnn|CuDNN|Nccl|NCCL|Device)[^ ]* \(' || true)
  tests_line="$total run, $passed passed ($gpu_named with Gpu/Cuda/Cudnn/Nccl/Device in the name), $failed_n failed, $skipped skipped"
  [ "$crashed" -gt 0 ] && tests_line+=", $crashed did not finish"
  tests_line+=" ($JOBS shards, $(( $(date +%s) - ts )) s)"
  [ "$skipped" -gt 0 ] && [ -n "$reasons" ] && tests_line+="; skips: $reasons"
  if [ -n "$timed_out" ]; then
    tests_line+="; shard(s)$timed_out TIMED OUT after $tlimit s"
  fi
  if [ "$failed_n" -gt 0 ] || [ "$crashed" -gt 0 ] || [ -n "$timed_out" ] || [ "$total" = 0 ]; then
    result[tests]=FAIL failed=1
    say "tests FAILED: $(head -20 "$LOG_DIR/tests_failed.txt" | tr '\n' ' ')"
    for i in $(seq 0 $((JOBS - 1))); do  # a crash: the last case a shard started
      tail -1 "$LOG_DIR/tests_$i.log" | grep -qE '^\[ +(OK|FAILED|SKIPPED) +\]|^\[  PASSED  \]|tests? ran|listed below|FAILED TESTS' ||
        say "  shard $i ended in: $(grep -E '^\[ RUN +\] ' "$LOG_DIR/tests_$i.log" | tail -1)"
    done
  else
    result[tests]=PASS
  fi
  say "tests: $tests_line"
fi

# key=value from a line of them.
kv() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | tail -1; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# trainer time on the GPU; prints the "time:" line, or fails.
trainer_time() {  # LOG SECONDS ARGS...
  local log=$1 secs=$2
  shift 2
  # RUN_FLAGS: the switches of this run alone (unquoted on purpose: split into words)
  # shellcheck disable=SC2086
  timeout -k 10 "$(limit "$secs")" "${cortado_env[@]}" "$TRAINER" time --gpu="$GPU" "$@" ${RUN_FLAGS:-} >"$log" 2>&1
  local rc=$?
  [ $rc = 0 ] || { echo "gpu_check: exit status $rc$( [ $rc = 124 ] || [ $rc = 137 ] && echo ': TIMED OUT')" >>"$log"; return 1; }
  grep '^time:' "$log" | tail -1 | grep . || return 1
}

# What a ResNet-50 run did besides its speed (trainer time's "time:" line):
# its final losses, its skipped updates, and which engines its layers ran on.
run_facts() {
  local o=$1
  echo "loss $(kv last_loss "$o") (loop $(kv loop_loss "$o")), skipped $(kv skipped_updates "$o") + $(kv loop_skipped_steps "$o") in the loop, BatchNorm on cuDNN $(kv bn_cudnn "$o")/$(kv bn_layers "$o") (backward $(kv bn_cudnn_backward "$o")), graph-API passes $(kv conv_graph_passes "$o")/$(( 3 * $(kv cudnn_convs "$o") )), padded convolutions $(kv conv_padded "$o"), NHWC blobs $(kv nhwc_blobs "$o")"
}
# Why a run is not a measurement (prints the reason, status 0), or status 1:
# a loss that is not finite, a skipped update, or a switch of its flags that
# no layer took.
run_broken() {
  local o=$1 flags=$2 why=""
  for k in last_loss loop_loss; do
    case "$(kv $k "$o")" in ""|*nan*|*NaN*|*inf*|*Inf*) why+="${why:+, }$k $(kv $k "$o")" ;; esac
  done
  [ "$(kv skipped_updates "$o")" = 0 ] || why+="${why:+, }$(kv skipped_updates "$o") timed updates skipped"
  [ "$(kv loop_skipped_steps "$o")" = 0 ] || why+="${why:+, }$(kv loop_skipped_steps "$o") loop steps skipped"
  for w in $flags; do
    case "$w" in
      --channels_last=1) [ "$(kv nhwc_blobs "$o")" -gt 0 ] 2>/dev/null || why+="${why:+, }no blob is channels-last" ;;
      --cudnn_batch_norm=1) [ "$(kv bn_cudnn "$o")" -gt 0 ] 2>/dev/null && [ "$(kv bn_cudnn_backward "$o")" -gt 0 ] 2>/dev/null ||
                              why+="${why:+, }no BatchNorm ran on cuDNN forward and backward" ;;
      --cudnn_api=graph) [ "$(kv conv_graph_passes "$o")" -gt 0 ] 2>/dev/null || why+="${why:+, }no convolution pass ran on a graph plan" ;;
      --cudnn_pad_channels=*) [ "$(kv conv_padded "$o")" -gt 0 ] 2>/dev/null || why+="${why:+, }no convolution was padded" ;;
    esac
  done
  [ -n "$why" ] && echo "$why"
}

# ---- c. LeNet ---------------------------------------------------------------------------------
lenet_line="not run (--no-lenet)"
if [ $RUN_LENET = 1 ] && [ $HAVE_GPU = 0 ]; then
  lenet_line="SKIPPED (no GPU)"
elif [ $RUN_LENET = 1 ]; then
  say "c. LeNet FP32 and FP16, DummyData batch 64, 3 runs x 200 iterations (logs: $LOG_DIR/lenet_*.log)"
  declare -A lenet_ms=([fp32]="" [fp16]="")
  lenet_ok=1
  for r in 1 2 3; do
    for p in fp32 fp16; do
      if out=$(trainer_time "$LOG_DIR/lenet_${p}_$r.log" 60 --model=models/lenet/lenet_train_test.prototxt \
                 --stage=synthetic --precision=$p --iterations=200 --warmup=20); then
        lenet_ms[$p]+="$(kv total_ms_median "$out") "
      else
        lenet_ok=0; tail -5 "$LOG_DIR/lenet_${p}_$r.log" >&2; break 2
      fi
    done
  done
  if [ $lenet_ok = 1 ]; then
    m32=$(echo "${lenet_ms[fp32]}" | tr ' ' '\n' | grep . | median)
    m16=$(echo "${lenet_ms[fp16]}" | tr ' ' '\n' | grep . | median)
    lenet_line="FP32 $m32 ms/iter, FP16 $m16 ms/iter, FP32/FP16 = $(awk -v a="$m32" -v b="$m16" 'BEGIN { printf "%.2f", a / b }') (batch 64, DummyData, median of 3 runs x 200 iterations)"
    result[lenet]=PASS
  else
    lenet_line="FAILED (see $LOG_DIR/lenet_*.log)"; result[lenet]=FAIL failed=1
  fi
  say "LeNet: $lenet_line"
fi

# ---- d. ResNet-50 -------------------------------------------------------------------------------
declare -A resnet_line=()
if [ $RUN_RESNET = 1 ] && { [ $HAVE_GPU = 1 ] || [ "$GPU" = cpu ]; }; then
  say "d. ResNet-50 FP16 batch $RESNET_BATCH: Cortado (resnet50, resnet50_nvcaffe) and PyTorch AMP, $RESNET_WARMUP + $RESNET_ITERS iterations (logs: $LOG_DIR/resnet_*.log)"
  torch_device=cuda:$GPU torch_check='import torch; assert torch.cuda.is_available()'
  [ "$GPU" = cpu ] && torch_device=cpu torch_check='import torch'
  result[resnet]=PASS
  # PyTorch first: the baseline of every ratio, kept when the deadline cuts the variants short.
  log=$LOG_DIR/resnet_pytorch.log
  if ! "$PYTHON" -c "$torch_check" >"$log" 2>&1; then
    resnet_line[pytorch]="n/a: PyTorch (${torch_device%%:*}) not importable by $PYTHON ($(tail -1 "$log"))"
  else
    timeout -k 10 "$(limit "$RESNET_TIMEOUT")" "$PYTHON" scripts/bench/resnet50_pytorch.py --precision amp --batch "$RESNET_BATCH" \
      --iters "$RESNET_ITERS" --warmup "$RESNET_WARMUP" --device "$torch_device" >"$log" 2>&1
    rc=$?
    out=$(grep '^pytorch:' "$log" | tail -1)
    if [ $rc = 0 ] && [ -n "$out" ]; then
      resnet_line[pytorch]="$(kv images_per_s "$out") images/s, peak $(kv peak_allocated_mib "$out") MiB allocated, $(kv peak_reserved_mib "$out") MiB reserved ($(kv ms_median "$out") ms/iter; torch $(kv torch "$out"), cuDNN $(kv cudnn "$out"), $(kv model "$out"))"
      resnet_ips[pytorch]=$(kv images_per_s "$out")
    else
      resnet_line[pytorch]="FAILED (exit status $rc$([ $rc = 3 ] && echo ': out of memory'); see $log)"
      result[resnet]=FAIL failed=1
      tail -5 "$log" >&2
    fi
  fi
  say "PyTorch AMP: ${resnet_line[pytorch]}"
  # The unfused run: the same net file with fuse_layers: false first.
  { echo "fuse_layers: false"; cat models/resnet50_nvcaffe/train_val.prototxt; } >"$LOG_DIR/resnet50_nvcaffe_unfused.prototxt"
  for net in $RESNET_NETS; do
    log=$LOG_DIR/resnet_$net.log
    folder=$net; [ $net = resnet50 ] || folder=resnet50_nvcaffe
    model=models/$folder/train_val.prototxt solver=models/$folder/solver.prototxt
    [ $net = resnet50_nvcaffe_unfused ] && model=$LOG_DIR/resnet50_nvcaffe_unfused.prototxt
    run_flags=${RESNET_FLAGS[$net]}
    if out=$(RUN_FLAGS=$run_flags trainer_time "$log" "$RESNET_TIMEOUT" --model="$model" \
               --solver="$solver" --stage=synthetic --precision=fp16 --batch_size="$RESNET_BATCH" \
               --iterations="$RESNET_ITERS" --warmup="$RESNET_WARMUP"); then
      reserved=$(grep -oE '[0-9.]+ MiB reserved from the device at most' "$log" | tail -1 | awk '{print $1}')
      resnet_line[$net]="$(kv images_per_s "$out") images/s synchronized per part, $(kv loop_images_per_s "$out") in the training loop, peak $(kv peak_mem_mib "$out") MiB live${reserved:+, $reserved MiB reserved} ($(kv total_ms_median "$out") ms/iter); $(run_facts "$out")"
      if why=$(run_broken "$out" "$run_flags"); then
        resnet_line[$net]="BROKEN: $why; $(run_facts "$out") (not a time: $(kv loop_images_per_s "$out") images/s)"
        result[resnet]=FAIL failed=1
      else
        resnet_ips[$net]=$(kv images_per_s "$out")
        resnet_loop[$net]=$(kv loop_images_per_s "$out")
      fi
    else
      if grep -qi "out of memory" "$log"; then resnet_line[$net]="OUT OF MEMORY at batch $RESNET_BATCH"
      elif tail -1 "$log" | grep -q 'TIMED OUT'; then resnet_line[$net]="TIMED OUT (RESNET_TIMEOUT $RESNET_TIMEOUT s, DEADLINE $DEADLINE s)"
      else resnet_line[$net]="FAILED: $(grep -m1 -iE 'error|check failed' "$log" | cut -c1-160)"; fi
      result[resnet]=FAIL failed=1
      tail -5 "$log" >&2
    fi
    say "Cortado $net: ${resnet_line[$net]}"
  done
fi

# ---- g. ResNet-50 learns ----------------------------------------------------------------------------
# scripts/bench/resnet50_train_check.sh on an LMDB made on the build machine
# (PREPARE_ONLY=1 WORK_DIR=.gpu_data) and carried beside the bundle: both
# ResNet-50 files, with the defaults of this build, must learn on the GPU.
train_line="not run (--no-train)"
TRAIN_DATA=${TRAIN_DATA:-$BUNDLE/../.gpu_data}
if [ $RUN_TRAIN = 1 ] && [ $HAVE_GPU = 0 ] && [ "$GPU" != cpu ]; then
  train_line="SKIPPED (no GPU)"
elif [ $RUN_TRAIN = 1 ] && ! ls "$TRAIN_DATA"/*lmdb* >/dev/null 2>&1; then
  train_line="SKIPPED: no LMDB in TRAIN_DATA ($TRAIN_DATA; make it with PREPARE_ONLY=1 WORK_DIR=.gpu_data bash scripts/bench/resnet50_train_check.sh)"
elif [ $RUN_TRAIN = 1 ]; then
  tl=$(limit "$TRAIN_TIMEOUT")
  train_args=()
  [ "$GPU" = cpu ] && train_args=(BATCH=2 ITERS=30)
  say "g. ResNet-50 learns: resnet50_train_check.sh on $TRAIN_DATA${train_args:+ (${train_args[*]})}, limit $tl s (log: $LOG_DIR/train_check.log)"
  timeout -k 10 "$tl" "${cortado_env[@]}" GPU="$GPU" TRAINER="$TRAINER" WORK_DIR="$TRAIN_DATA" PYTHON="$PYTHON" \
    "${train_args[@]}" bash scripts/bench/resnet50_train_check.sh >"$LOG_DIR/train_check.log" 2>&1
  rc=$?
  tline=$(grep '^resnet50_train_check:' "$LOG_DIR/train_check.log" | tail -1 | sed 's/^resnet50_train_check: //')
  if [ $rc = 0 ]; then train_line="PASS: $tline"; result[train]=PASS
  elif [ $rc = 124 ] || [ $rc = 137 ]; then train_line="TIMED OUT after $tl s"; result[train]=FAIL failed=1
  else train_line="FAILED (exit status $rc): ${tline:-$(tail -1 "$LOG_DIR/train_check.log" | cut -c1-200)}"; result[train]=FAIL failed=1; fi
  say "train check: $train_line"
fi

# ---- f. nvJPEG ----------------------------------------------------------------------------------
nvjpeg_line="not run (--no-nvjpeg)"
if [ $RUN_NVJPEG = 1 ] && [ $HAVE_GPU = 0 ]; then
  nvjpeg_line="SKIPPED (no GPU)"
elif [ $RUN_NVJPEG = 1 ] && [ ! -x bin/nvjpeg_decode ]; then
  nvjpeg_line="SKIPPED (the bundle has no nvjpeg_decode)"
elif [ $RUN_NVJPEG = 1 ]; then
  say "f. nvJPEG: bin/nvjpeg_decode at batch $NVJPEG_BATCH, FP16, 3 runs x 20 batches (logs: $LOG_DIR/nvjpeg_*.log)"
  probe=$(timeout -k 5 "$(limit 60)" "${cortado_env[@]}" bin/nvjpeg_decode --iters=0 --warmup=0 /dev/null 2>&1)
  if echo "$probe" | grep -q 'skipped:'; then
    nvjpeg_line="SKIPPED: $(echo "$probe" | grep -m1 'skipped:' | sed 's/.*skipped: //')"
  else
    jdir=$(mktemp -d)
    if ! "$PYTHON" scripts/bench/imagenet_jpegs.py "$jdir" 1024 >"$LOG_DIR/nvjpeg_images.log" 2>&1; then
      nvjpeg_line="FAILED: could not make the JPEGs ($(tail -1 "$LOG_DIR/nvjpeg_images.log"))"; result[nvjpeg]=FAIL failed=1
    else
      rates=() jline=""
      for r in 1 2 3; do
        timeout -k 10 "$(limit 90)" "${cortado_env[@]}" bin/nvjpeg_decode --batch="$NVJPEG_BATCH" --iters=20 \
          --warmup=3 --type=FLOAT16 "$jdir/list.txt" >"$LOG_DIR/nvjpeg_$r.log" 2>&1
        rc=$?
        jline=$(grep '^nvjpeg_decode:' "$LOG_DIR/nvjpeg_$r.log" | tail -1)
        [ $rc = 0 ] && [ -n "$(kv images_per_s "$jline")" ] || { rates=(); break; }
        rates+=("$(kv images_per_s "$jline")")
      done
      if [ ${#rates[@]} = 3 ]; then
        nvjpeg_line="$(printf '%s\n' "${rates[@]}" | median) images/s median of 3 ($(echo "$jline" | sed 's/^nvjpeg_decode: //'))"
        result[nvjpeg]=PASS
      else
        nvjpeg_line="FAILED (exit status $rc; see $LOG_DIR/nvjpeg_$r.log: $(tail -1 "$LOG_DIR/nvjpeg_$r.log" | cut -c1-200))"
        result[nvjpeg]=FAIL failed=1
      fi
    fi
    rm -rf "$jdir"
  fi
  say "nvJPEG: $nvjpeg_line"
fi

# ---- b. memcheck ----------------------------------------------------------------------------------
memcheck_line="not run (--no-memcheck)"
if [ $RUN_MEMCHECK = 1 ] && [ $HAVE_GPU = 0 ]; then
  memcheck_line="SKIPPED (no GPU)"
elif [ $RUN_MEMCHECK = 1 ]; then
  SANITIZER=$(command -v compute-sanitizer || true)
  if [ -z "$SANITIZER" ]; then
    for s in "${CUDA_HOME:-/nonexistent}"/{bin,compute-sanitizer}/compute-sanitizer \
             /usr/local/cuda{,-*}/{bin,compute-sanitizer}/compute-sanitizer; do
      [ -x "$s" ] && { SANITIZER=$s; break; }
    done
  fi
  if [ -z "$SANITIZER" ]; then
    memcheck_line="SKIPPED: compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda*)"
    say "b. memcheck $memcheck_line"
  else
    say "b. memcheck: $SANITIZER on ResNet-50 FP16 batch 8, 1 iteration${MEMCHECK_FLAGS:+, $MEMCHECK_FLAGS}${MEMCHECK_ENV:+, $MEMCHECK_ENV} (log: $LOG_DIR/memcheck.log)"
    ts=$(date +%s)
    mlimit=$(limit "$MEMCHECK_TIMEOUT")
    # shellcheck disable=SC2086  # MEMCHECK_ENV: VAR=value words, MEMCHECK_FLAGS: flags, split on purpose
    timeout -k 10 "$mlimit" "${cortado_env[@]}" ${MEMCHECK_ENV:-} "$SANITIZER" --tool memcheck --leak-check no \
      --report-api-errors no --print-limit 20 --error-exitcode 9 \
      "$TRAINER" time --model=models/resnet50/train_val.prototxt --stage=synthetic --precision=fp16 --gpu="$GPU" --batch_size=8 \
      --iterations=1 --warmup=1 ${MEMCHECK_FLAGS:-} >"$LOG_DIR/memcheck.log" 2>&1
    rc=$?
    errors=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$LOG_DIR/memcheck.log" | tail -1 | grep -oE '[0-9]+' || true)
    took=$(( $(date +%s) - ts ))
    if [ $rc = 124 ] || [ $rc = 137 ]; then
      memcheck_line="TIMED OUT after $mlimit s (rerun alone: --no-tests --no-bench, MEMCHECK_TIMEOUT=400)"; result[memcheck]=FAIL failed=1
    elif [ $rc = 0 ] && [ "${errors:-x}" = 0 ]; then
      memcheck_line="0 errors (ResNet-50 FP16, batch 8, 1 iteration${MEMCHECK_FLAGS:+, $MEMCHECK_FLAGS}${MEMCHECK_ENV:+, $MEMCHECK_ENV}, $took s)"; result[memcheck]=PASS
    else
      memcheck_line="FAILED: ${errors:-?} errors, exit status $rc (first: $(grep -m1 -E '^========= (Invalid|Uninitialized|Program hit|Error)' "$LOG_DIR/memcheck.log" | sed 's/^========= //'))"
      result[memcheck]=FAIL failed=1
      grep -m20 -E '^=========' "$LOG_DIR/memcheck.log" >&2
    fi
    say "memcheck: $memcheck_line"
  fi
fi

# ---- e. summary -----------------------------------------------------------------------------------
ratio() { [ -n "${1:-}" ] && [ -n "${2:-}" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || echo "n/a"; }
stage_word() { [ -n "${result[$1]:-}" ] && echo "${result[$1]}" || echo "$2"; }
{
  echo "==== Cortado GPU check ===="
  if [ $HAVE_GPU = 1 ]; then
    echo "Device:    $GPU_NAME (GPU $GPU, $GPU_MEM, driver $DRIVER), $CORES CPU cores"
  elif [ "$GPU" = cpu ]; then
    echo "Device:    GPU=cpu: a dry run of the plan on the CPU ($CORES CPU cores); no number here is a GPU's"
  else
    echo "Device:    NO GPU FOUND: the GPU stages did not run ($CORES CPU cores)"
  fi
  echo "Bundle:    commit $(sed -n 's/^commit: //p' MANIFEST), CUDA $(sed -n 's/^nvcc: //p' MANIFEST) for sm_$(sed -n 's/^cuda_architectures: //p' MANIFEST); CUDA libraries from $cuda_dirs"
  echo "Tests:     $tests_line"
  echo "Memcheck:  $memcheck_line"
  echo "LeNet:     $lenet_line"
  if [ $RUN_RESNET = 0 ]; then
    echo "ResNet-50: not run (--no-resnet)"
  elif [ $HAVE_GPU = 0 ] && [ "$GPU" != cpu ]; then
    echo "ResNet-50: SKIPPED (no GPU)"
  else
    echo "ResNet-50: FP16 batch $RESNET_BATCH$([ "$GPU" = cpu ] && echo ' ON THE CPU (GPU=cpu, a dry run of the plan)'), median of $RESNET_ITERS iterations after $RESNET_WARMUP (the variants: resnet50_nvcaffe with the switches named; BROKEN: a loss not finite, a skipped update or a switch no layer took, not a time):"
    for net in $RESNET_NETS; do
      label="$net${RESNET_FLAGS[$net]:+ ($(echo ${RESNET_FLAGS[$net]} | sed 's/--//g'))}"
      [ $net = resnet50_nvcaffe_unfused ] && label="$net (fuse_layers: false)"
      echo "  $label: ${resnet_line[$net]:-not run}"
    done
    echo "  Fusion gain (fused/unfused):     $(ratio "${resnet_ips[resnet50_nvcaffe]:-}" "${resnet_ips[resnet50_nvcaffe_unfused]:-}")"
    gains=""
    for net in $RESNET_NETS; do
      case $net in resnet50_nvcaffe_nhwc*)
        gains+="${gains:+, }${net#resnet50_nvcaffe_} $(ratio "${resnet_loop[$net]:-}" "${resnet_loop[resnet50_nvcaffe]:-}")" ;;
      esac
    done
    echo "  Gains over NCHW (loop):          ${gains:-n/a}"
    vs=""
    for net in $RESNET_NETS; do vs+="${vs:+, }$net $(ratio "${resnet_loop[$net]:-}" "${resnet_ips[pytorch]:-}")"; done
    echo "  Each run's loop / PyTorch AMP:   $vs"
    echo "  PyTorch AMP channels_last:       ${resnet_line[pytorch]}"
    echo "  Cortado/PyTorch images/s:        resnet50 $(ratio "${resnet_ips[resnet50]:-}" "${resnet_ips[pytorch]:-}"), resnet50_nvcaffe $(ratio "${resnet_ips[resnet50_nvcaffe]:-}" "${resnet_ips[pytorch]:-}") (parts timed one by one)"
    echo "  the same, Cortado's training loop: resnet50 $(ratio "${resnet_loop[resnet50]:-}" "${resnet_ips[pytorch]:-}"), resnet50_nvcaffe $(ratio "${resnet_loop[resnet50_nvcaffe]:-}" "${resnet_ips[pytorch]:-}") (back to back, deferred steps and CUDA graphs)"
  fi
  echo "Learns:    $train_line"
  echo "nvJPEG:    $nvjpeg_line"
  echo "Stages:    tests $(stage_word tests "-"), memcheck $(stage_word memcheck "-"), lenet $(stage_word lenet "-"), resnet $(stage_word resnet "-"), train $(stage_word train "-"), nvjpeg $(stage_word nvjpeg "-"); $(elapsed) s in all"
  echo "Logs:      $LOG_DIR, packed as $LOG_ARCHIVE"
} >"$SUMMARY_FILE.tmp"
echo
cat "$SUMMARY_FILE.tmp"
mv "$SUMMARY_FILE.tmp" "$SUMMARY_FILE"
cp "$SUMMARY_FILE" "$LOG_DIR/"
# One archive of every log and the summary, to bring back from the GPU machine.
if command -v xz >/dev/null; then tar -cJf "$LOG_ARCHIVE" -C "$REPORT_DIR" gpu_check_logs
else tar -czf "${LOG_ARCHIVE%.xz}.gz" -C "$REPORT_DIR" gpu_check_logs; fi
echo "(written to $SUMMARY_FILE; the logs packed as $LOG_ARCHIVE)"
[ $failed = 1 ] && exit 1
[ $HAVE_GPU = 0 ] && exit 2
exit 0
