#!/usr/bin/env bash
# The GPU check, one command, on a machine with an NVIDIA GPU, nvcc, CMake and
# ninja, and no network: run from the repository root with .deps/ (made by
# scripts/gpu_prepare.sh on a build machine) beside it.
#
#   1. unpacks .deps/debs/*.deb into .deps/prefix (dpkg -x; never into /)
#   2. configures build-gpu/ (USE_CUDA=ON, USE_OPENCV=OFF, the GPU's compute
#      capability) against that prefix only, and builds with all cores
#   3. runs the whole test suite with ctest (GPU cases included)
#   4. converts Fashion-MNIST (from the prefix) to LMDB
#   5. `trainer time --gpu` for LeNet FP32, FP16 and BF16 (scripts/bench/lenet_gpu.sh),
#      for the largest net under models/*/ (by parameters), for AlexNet and
#      GoogLeNet (DummyData, FP32 and FP16), and ResNet-50 against PyTorch
#      (scripts/bench/resnet50_gpu.sh, FP16/AMP and FP32)
#   6. trains LeNet with FP16 storage on the GPU (models/lenet/solver_fp16.prototxt)
#   7. prints a summary last
#
# Options: --build-only (steps 1-2), --no-tests (skip step 3), --no-bench
# (stop after step 3), --no-resnet (skip the ResNet-50 comparison, the
# longest benchmark; RESNET_REPEATS sets its runs, default 3). A run split
# into calls (--build-only; --no-bench; --no-tests) reuses the build.
# Environment: DEPS_DIR (.deps), BUILD_DIR (build-gpu), JOBS (all cores),
# GPU (0), CUDA_ARCH (detected; 90 when nvidia-smi cannot tell), LOG_DIR
# ($BUILD_DIR/gpu_check_logs), STRICT_PREFIX=1 (configure with
# CMAKE_FIND_ROOT_PATH=<prefix> so that nothing outside the prefix can be
# found: proves independence from the system's -dev packages; needs CUDA OFF
# or CUDA inside the prefix, so it is for checks on a build machine).
#
# Without a GPU it says so, builds and runs the tests (GPU cases skip), skips
# the GPU steps and exits with status 2. Exit status 1: a step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench/lib.sh
# Globs sort bytewise (solver.prototxt before solver_fp16.prototxt).
export LC_COLLATE=C

BUILD_ONLY=0
RUN_TESTS=1
RUN_RESNET=1
RUN_BENCH=1
for a in "$@"; do
  case "$a" in
    --build-only) BUILD_ONLY=1 ;;
    --no-tests) RUN_TESTS=0 ;;
    --no-resnet) RUN_RESNET=0 ;;
    --no-bench) RUN_BENCH=0 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown option $a (see --help)" >&2; exit 1 ;;
  esac
done

DEPS_DIR=$(cd "${DEPS_DIR:-.deps}" 2>/dev/null && pwd) || {
  echo "gpu_check: ${DEPS_DIR:-.deps} not found: run scripts/gpu_prepare.sh on a build machine and carry .deps/" >&2
  exit 1
}
PREFIX=$DEPS_DIR/prefix
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
GPU=${GPU:-0}
LOG_DIR=${LOG_DIR:-$BUILD_DIR/gpu_check_logs}
LOCK=/tmp/cortado-build.lock

say() { echo "gpu_check: $*"; }
die() { echo "gpu_check: error: $*" >&2; exit 1; }
# Builds wait for each other on shared machines.
locked() { if command -v flock >/dev/null; then flock "$LOCK" "$@"; else "$@"; fi; }

# ---- 1. unpack ------------------------------------------------------------------
ls "$DEPS_DIR"/debs/*.deb >/dev/null 2>&1 || die "no .deb files in $DEPS_DIR/debs: run scripts/gpu_prepare.sh"
unpack_deb() {
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$PREFIX"
  else  # a .deb is an ar archive holding data.tar.{xz,zst,gz}
    local member
    member=$(ar t "$1" | grep '^data\.tar')
    case "$member" in
      *.xz) ar p "$1" "$member" | tar -xJ -C "$PREFIX" ;;
      *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$PREFIX" ;;
      *.gz) ar p "$1" "$member" | tar -xz -C "$PREFIX" ;;
      *) die "$1: unknown data member $member" ;;
    esac
  fi
}
stamp=$PREFIX/.unpacked
if [ ! -f "$stamp" ] || [ -n "$(find "$DEPS_DIR/debs" -name '*.deb' -newer "$stamp")" ]; then
  say "unpacking $(ls "$DEPS_DIR"/debs/*.deb | wc -l) packages into $PREFIX"
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  for d in "$DEPS_DIR"/debs/*.deb; do unpack_deb "$d"; done
  # Absolute links (zlib1g-dev's libz.so -> /lib/...) would point at the
  # system: re-point them into the prefix.
  while IFS= read -r l; do
    t=$(readlink "$l")
    [ -e "$PREFIX$t" ] || [ -L "$PREFIX$t" ] || die "$l -> $t: not in the prefix"
    ln -sfnr "$PREFIX$t" "$l"
  done < <(find "$PREFIX" -type l -lname '/*')
  # glog's CMake config adds the absolute /usr/share/glog/cmake (FindUnwind)
  # to the module path: make it relative to the config file.
  for f in "$PREFIX"/usr/lib/*/cmake/glog/glog-modules.cmake; do
    [ -f "$f" ] && sed -i 's|"/usr/share/glog/cmake"|"${CMAKE_CURRENT_LIST_DIR}/../../../../share/glog/cmake"|' "$f"
  done
  touch "$stamp"
fi

TRIPLET=$(basename "$(ls -d "$PREFIX"/usr/lib/*-linux-gnu | head -1)")
BLAS_INC=$PREFIX/usr/include/$TRIPLET/openblas-pthread
BLAS_LIB=$PREFIX/usr/lib/$TRIPLET/openblas-pthread/libopenblas.so
[ -f "$BLAS_INC/cblas.h" ] || die "$BLAS_INC/cblas.h missing: is libopenblas-pthread-dev in .deps/debs?"
[ -e "$BLAS_LIB" ] || die "$BLAS_LIB missing"
DATA_DIR=$PREFIX/usr/share/datasets/fashion-mnist

export PATH=$PREFIX/usr/bin:$PATH
LIBPATH=$PREFIX/usr/lib/$TRIPLET:$PREFIX/lib/$TRIPLET:$PREFIX/usr/lib/$TRIPLET/openblas-pthread
export LD_LIBRARY_PATH=$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$PREFIX/usr
export FASHION_MNIST_DIR=$DATA_DIR
"$PREFIX/usr/bin/protoc" --version >/dev/null || die "protoc from the prefix does not run"

# ---- GPU and CUDA -------------------------------------------------------------------
HAVE_GPU=0
GPU_NAME="none"
if command -v nvidia-smi >/dev/null && caps=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null) \
   && [ -n "$caps" ]; then
  HAVE_GPU=1
  line=$(echo "$caps" | sed -n "$((GPU + 1))p")
  [ -n "$line" ] || die "GPU=$GPU, but nvidia-smi lists only $(echo "$caps" | wc -l) device(s)"
  GPU_NAME=$(echo "$line" | cut -d, -f1 | sed 's/ *$//')
  detected=$(echo "$line" | cut -d, -f2 | tr -d ' .')
fi
CUDA_ARCH=${CUDA_ARCH:-${detected:-90}}
NVCC=""
if command -v nvcc >/dev/null; then NVCC=$(command -v nvcc)
elif [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC=$CUDA_HOME/bin/nvcc
elif [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc
fi
USE_CUDA=ON
if [ "${STRICT_PREFIX:-0}" = 1 ]; then USE_CUDA=OFF; fi
if [ "$USE_CUDA" = ON ] && [ -z "$NVCC" ]; then die "nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)"; fi
if [ $HAVE_GPU = 1 ]; then
  say "GPU $GPU: $GPU_NAME, building for sm_$CUDA_ARCH"
else
  say "NO NVIDIA GPU FOUND (nvidia-smi missing or lists no device): the GPU steps will be skipped;"
  say "building for sm_$CUDA_ARCH and running the tests anyway (their GPU cases skip)"
fi

# ---- 2. configure and build ---------------------------------------------------------
mkdir -p "$LOG_DIR"
cmake_args=(-S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
  "-DUSE_CUDA=$USE_CUDA" -DUSE_OPENCV=OFF -DUSE_MPI=OFF -DBUILD_TESTS=ON
  -DCORTADO_CUDA_ARCHITECTURES="$CUDA_ARCH"
  -DCMAKE_PREFIX_PATH="$PREFIX/usr"
  -DOPENBLAS_INCLUDE_DIR="$BLAS_INC" -DOPENBLAS_LIBRARY="$BLAS_LIB"
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
[ -n "$NVCC" ] && [ "$USE_CUDA" = ON ] && cmake_args+=(-DCMAKE_CUDA_COMPILER="$NVCC")
if [ "${STRICT_PREFIX:-0}" = 1 ]; then
  cmake_args+=(-DCMAKE_FIND_ROOT_PATH="$PREFIX" -DCMAKE_PREFIX_PATH=/usr
    -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY
    -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=BOTH)
fi
say "configuring $BUILD_DIR (log: $LOG_DIR/configure.log)"
cmake "${cmake_args[@]}" >"$LOG_DIR/configure.log" 2>&1 || { tail -40 "$LOG_DIR/configure.log"; die "configure failed"; }
# Every dependency must come from the prefix, not from the system.
bad=$(grep -E '^(Protobuf_[A-Z_]*(LIBRARY|INCLUDE_DIR|EXECUTABLE)[A-Z_]*|glog_DIR|gflags_DIR|GTest_DIR|LMDB_[A-Z_]*|OPENBLAS_[A-Z_]*|ZLIB_[A-Z_]*|Unwind_[A-Z_]*):[A-Z]+=/' \
      "$BUILD_DIR/CMakeCache.txt" | grep -v "=$PREFIX" | grep -v -- '-NOTFOUND' || true)
[ -z "$bad" ] || { echo "$bad" >&2; die "the dependencies above were found outside $PREFIX"; }
say "dependencies found in the prefix: $(grep -cE "^[A-Za-z_]+:[A-Z]+=$PREFIX" "$BUILD_DIR/CMakeCache.txt") cache entries point into it"
# The tools first: the benchmarks and the training need only them, so a test
# that does not compile still leaves the GPU numbers to report.
say "building the library and tools with $JOBS jobs (log: $LOG_DIR/build.log)"
locked cmake --build "$BUILD_DIR" -j "$JOBS" --target trainer convert_mnist >"$LOG_DIR/build.log" 2>&1 \
  || { tail -60 "$LOG_DIR/build.log"; die "build failed"; }
TESTS_BUILT=1
if [ $RUN_TESTS = 1 ] || [ $BUILD_ONLY = 1 ]; then
  say "building the tests (log: $LOG_DIR/build_tests.log)"
  if ! locked cmake --build "$BUILD_DIR" -j "$JOBS" >"$LOG_DIR/build_tests.log" 2>&1; then
    grep -E 'error|FAILED' "$LOG_DIR/build_tests.log" | head -20
    say "THE TESTS DO NOT BUILD: no tests run; going on with the GPU steps"
    TESTS_BUILT=0
  fi
fi
say "build done"
if [ $BUILD_ONLY = 1 ]; then
  say "--build-only: stopping after the build"
  [ $TESTS_BUILT = 1 ] || exit 1
  exit 0
fi

tests_line() {
  if [ $RUN_TESTS = 0 ]; then echo "not run (--no-tests)"
  elif [ $TESTS_BUILT = 0 ]; then echo "NOT BUILT: the test sources do not compile (see $LOG_DIR/build_tests.log)"
  else echo "$t_total run, $t_passed passed, $t_failed failed, $t_skipped skipped${1:-}"; fi
}

# ---- 3. tests ---------------------------------------------------------------------
status=0
t_total="-" t_passed="-" t_failed="-" t_skipped="-"
if [ $RUN_TESTS = 1 ] && [ $TESTS_BUILT = 0 ]; then
  status=1
fi
if [ $RUN_TESTS = 1 ] && [ $TESTS_BUILT = 1 ]; then
  say "running the test suite (ctest -j $JOBS; log: $LOG_DIR/ctest.log)"
  set +e
  (cd "$BUILD_DIR" && ctest -j "$JOBS" --output-on-failure) >"$LOG_DIR/ctest.log" 2>&1
  ctest_rc=$?
  set -e
  # CTest 3.x: "97% tests passed, 3 tests failed out of 100"; CTest 4.x
  # leaves out ", 0 tests failed" when none failed.
  summary_line=$(grep -E 'tests passed(, [0-9]+ tests? failed)? out of [0-9]+' "$LOG_DIR/ctest.log" | tail -1 || true)
  if [ -n "$summary_line" ]; then
    t_total=$(echo "$summary_line" | sed -E 's/.* out of ([0-9]+).*/\1/')
    t_failed=0
    if echo "$summary_line" | grep -qE 'tests? failed'; then
      t_failed=$(echo "$summary_line" | sed -E 's/.* ([0-9]+) tests? failed.*/\1/')
    fi
    t_skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)' "$LOG_DIR/ctest.log" || true)
    t_passed=$((t_total - t_failed - t_skipped))
  else
    tail -20 "$LOG_DIR/ctest.log"
    say "ctest gave no summary line"
    t_total="?"
  fi
  [ "$ctest_rc" = 0 ] || status=1
  grep -A200 'The following tests FAILED' "$LOG_DIR/ctest.log" | head -40 || true
  say "tests: $t_total run, $t_passed passed, $t_failed failed, $t_skipped skipped"
fi

# What the configure step found (the NCCL engine's tests skip without it).
build_line() {
  grep -oE 'CUDA backend [A-Z]+, NCCL [A-Z]+' "$LOG_DIR/configure.log" 2>/dev/null | tail -1 || echo "configure log not found"
}

if [ $RUN_BENCH = 0 ]; then
  echo
  echo "==== GPU check summary ===="
  echo "GPU:    $GPU_NAME; --no-bench: the benchmarks and the GPU training did not run"
  echo "Tests:  $(tests_line)"
  echo "Build:  $(build_line)"
  exit $status
fi

if [ $HAVE_GPU = 0 ]; then
  echo
  echo "==== GPU check summary ===="
  echo "GPU:    NONE FOUND - the GPU steps (trainer time --gpu, GPU training) did not run"
  echo "Tests:  $(tests_line " (GPU cases skip without a device)")"
  exit 2
fi

# ---- 4. data ----------------------------------------------------------------------
say "converting Fashion-MNIST from $DATA_DIR"
BUILD_DIR=$BUILD_DIR bash data/fashion_mnist/create.sh >"$LOG_DIR/data.log" 2>&1 || { tail -20 "$LOG_DIR/data.log"; die "data conversion failed"; }

TRAINER=$BUILD_DIR/tools/trainer
# key=value from trainer time's last line.

# ---- 5. benchmarks ------------------------------------------------------------------
say "timing LeNet FP32, FP16 and BF16 on GPU $GPU (log: $LOG_DIR/lenet_gpu.log)"
set +e
BUILD_DIR=$BUILD_DIR GPU=$GPU bash scripts/bench/lenet_gpu.sh >"$LOG_DIR/lenet_gpu.log" 2>&1
bench_rc=$?
set -e
bench=$(grep '^lenet_gpu:' "$LOG_DIR/lenet_gpu.log" | tail -1 || true)
if [ $bench_rc != 0 ] || [ -z "$bench" ]; then
  tail -20 "$LOG_DIR/lenet_gpu.log"; say "LeNet GPU benchmark FAILED"; status=1
else
  sed -n '/^Layers, last run/,$p' "$LOG_DIR/lenet_gpu.log" | grep -v '^lenet_gpu:' || true
fi
# The same at batch 1024, where the FP16 saving in memory traffic shows.
say "timing LeNet FP32, FP16 and BF16 at batch 1024 (log: $LOG_DIR/lenet_gpu_b1024.log)"
set +e
BATCH=1024 ITERS=${BIG_ITERS:-50} BUILD_DIR=$BUILD_DIR GPU=$GPU bash scripts/bench/lenet_gpu.sh >"$LOG_DIR/lenet_gpu_b1024.log" 2>&1
set -e
bench_big=$(grep '^lenet_gpu:' "$LOG_DIR/lenet_gpu_b1024.log" | tail -1 || true)
[ -n "$bench_big" ] && sed -n '/^Layers, last run/,$p' "$LOG_DIR/lenet_gpu_b1024.log" | grep -v '^lenet_gpu:' || true

# The largest net: every net a models/*/solver*.prototxt names, ranked by its
# learnable parameters (one untimed iteration each on the GPU).
largest="" largest_params=-1
declare -A seen=()
for solver in models/*/solver*.prototxt; do
  [ -f "$solver" ] || continue
  net=$(sed -n 's/^ *net: *"\(.*\)".*/\1/p' "$solver" | head -1)
  [ -n "$net" ] && [ -f "$net" ] || continue
  [ -n "${seen[$net]:-}" ] && continue
  seen[$net]=1
  out=$("$TRAINER" time --model="$net" --gpu="$GPU" --batch_size=1 --iterations=1 --warmup=0 2>>"$LOG_DIR/largest_scan.log" | grep '^time:' || true)
  p=$(kv params "$out")
  if [ -z "$p" ]; then say "could not time $net (see $LOG_DIR/largest_scan.log); skipped"; continue; fi
  if [ "$p" -gt "$largest_params" ]; then largest=$net largest_params=$p; fi
done
largest_line="none could be timed"
if [ -n "$largest" ]; then
  say "largest net: $largest ($largest_params learnable parameters); timing it (log: $LOG_DIR/largest.log)"
  if out=$("$TRAINER" time --model="$largest" --gpu="$GPU" --iterations="${TIME_ITERS:-100}" --warmup=10 2>"$LOG_DIR/largest.log" | grep '^time:'); then
    largest_line="$largest: $(kv total_ms_median "$out") ms/iter (forward $(kv forward_ms_median "$out"), backward $(kv backward_ms_median "$out")), $(kv images_per_s "$out") images/s, batch $(kv batch "$out"), $largest_params parameters"
  else
    largest_line="$largest: FAILED (see $LOG_DIR/largest.log)"; status=1
  fi
fi

# The ImageNet nets: AlexNet and GoogLeNet, FP32 and FP16 storage, on their
# DummyData variants at the training batch, with the default SGD update.
declare -A imagenet_line=()
for m in alexnet googlenet; do
  line=""
  for p in fp32 fp16; do
    suffix=""; [ $p = fp16 ] && suffix=_fp16
    net=models/$m/train_val_dummy$suffix.prototxt
    [ -f "$net" ] || continue
    say "timing $net (log: $LOG_DIR/${m}_$p.log)"
    if out=$("$TRAINER" time --model="$net" --gpu="$GPU" --iterations="${TIME_ITERS:-100}" --warmup=10 2>"$LOG_DIR/${m}_$p.log" \
             | tee "$LOG_DIR/${m}_$p.table" | grep '^time:'); then
      line+="$p $(kv total_ms_median "$out") ms/iter = $(kv images_per_s "$out") images/s (batch $(kv batch "$out"), peak $(kv peak_mem_mib "$out") MiB); "
    else
      line+="$p FAILED (see $LOG_DIR/${m}_$p.log); "; status=1
    fi
  done
  imagenet_line[$m]=${line%; }
done

# ResNet-50 against PyTorch on this GPU (scripts/bench/resnet50_gpu.sh).
resnet_line="not run (--no-resnet)"
if [ $RUN_RESNET = 1 ]; then
  say "ResNet-50, Cortado against PyTorch (log: $LOG_DIR/resnet50_gpu.log)"
  set +e
  BUILD_DIR=$BUILD_DIR GPU=$GPU LOG_DIR=$LOG_DIR/resnet50 REPEATS=${RESNET_REPEATS:-3} bash scripts/bench/resnet50_gpu.sh >"$LOG_DIR/resnet50_gpu.log" 2>&1
  resnet_rc=$?
  set -e
  r=$(grep '^resnet50_gpu:' "$LOG_DIR/resnet50_gpu.log" | tail -1 || true)
  if [ $resnet_rc != 0 ] || [ -z "$r" ]; then
    tail -20 "$LOG_DIR/resnet50_gpu.log"; resnet_line="FAILED (see $LOG_DIR/resnet50_gpu.log)"; status=1
  else
    sed -n '/^ResNet-50 training/,/^resnet50_gpu:/p' "$LOG_DIR/resnet50_gpu.log" | grep -v '^resnet50_gpu:'
    resnet_line="batch $(kv batch "$r"): Cortado FP16 $(kv cortado_fp16_ips "$r") images/s ($(kv cortado_fp16_mib "$r") MiB), PyTorch AMP $(kv pytorch_amp_ips "$r") ($(kv pytorch_amp_mib "$r") MiB), ratio $(kv ratio_fp16 "$r"); FP32: Cortado $(kv cortado_fp32_ips "$r"), PyTorch $(kv pytorch_fp32_ips "$r"), ratio $(kv ratio_fp32 "$r")"
  fi
fi

# ---- 6. training ------------------------------------------------------------------
SOLVER=models/lenet/solver_fp16.prototxt
say "training LeNet FP16 on GPU $GPU ($SOLVER; log: $LOG_DIR/lenet_fp16_train.log)"
t0=$(date +%s)
set +e
"$TRAINER" train --solver="$SOLVER" --gpu="$GPU" >"$LOG_DIR/lenet_fp16_train.log" 2>&1
train_rc=$?
set -e
train_s=$(( $(date +%s) - t0 ))
acc=$(grep "Test net output #0: accuracy" "$LOG_DIR/lenet_fp16_train.log" | tail -1 | sed 's/.*accuracy = //' || true)
if [ $train_rc != 0 ] || [ -z "$acc" ]; then
  tail -20 "$LOG_DIR/lenet_fp16_train.log"; say "LeNet GPU training FAILED"; status=1; acc="FAILED"
fi
ips=$(grep -oE '[0-9.e+]+ images/s' "$LOG_DIR/lenet_fp16_train.log" | tail -1 || true)

# ---- 7. summary -------------------------------------------------------------------
echo
echo "==== GPU check summary ===="
echo "GPU:     $GPU_NAME (device $GPU, sm_$CUDA_ARCH), $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p')"
echo "Tests:   $(tests_line)"
echo "Build:   $(build_line)"
if [ -n "$bench" ]; then
  echo "LeNet:   FP32 $(kv fp32_ms "$bench") ms/iter, FP16 $(kv fp16_ms "$bench") ms/iter (median of $(kv repeats "$bench") runs of $(kv iterations "$bench") iterations, batch $(kv batch "$bench"), forward+backward+update); FP32/FP16 = $(kv speedup "$bench"); type conversions per iteration: FP32 $(kv fp32_conversions "$bench"), FP16 $(kv fp16_conversions "$bench"), BF16 $(kv bf16_conversions "$bench")"
  echo "LeNet:   BF16 $(kv bf16_ms "$bench") ms/iter; FP32/BF16 = $(kv bf16_speedup "$bench")"
else
  echo "LeNet:   benchmark FAILED"
fi
if [ -n "$bench_big" ]; then
  echo "LeNet:   batch 1024: FP32 $(kv fp32_ms "$bench_big") ms/iter, FP16 $(kv fp16_ms "$bench_big") ms/iter, BF16 $(kv bf16_ms "$bench_big") ms/iter; FP32/FP16 = $(kv speedup "$bench_big"), FP32/BF16 = $(kv bf16_speedup "$bench_big")"
fi
echo "Largest: $largest_line"
for m in alexnet googlenet; do
  [ -n "${imagenet_line[$m]:-}" ] && printf '%-9s%s\n' "$m:" "${imagenet_line[$m]}"
done
echo "ResNet50: $resnet_line"
echo "Train:   LeNet FP16 on Fashion-MNIST, GPU: test accuracy = $acc after 2000 iterations (${train_s} s${ips:+, last $ips})"
echo "Logs:    $LOG_DIR"
exit $status
