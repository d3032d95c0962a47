#!/usr/bin/env bash
# Packs the GPU check into one folder, .gpu_bundle/, to carry to a GPU machine
# that has the NVIDIA driver, the CUDA libraries (a CUDA installation or the
# pip wheels of its Python) and nothing else of Cortado's: no compiler, no
# -dev packages, no network. Run it here, after a build with the CUDA backend
# for that GPU (CORTADO_CUDA_ARCHITECTURES, 90 for Hopper); there, run
#
#   bash .gpu_bundle/gpu_check.sh        (see scripts/gpu_check.sh --help)
#
# What goes in (laid out as the repository, so the tests and the benchmarks
# find the model files where they look for them):
#   bin/      trainer, cortado_tests (the whole GoogleTest suite, GPU cases
#             included), nvjpeg_decode (stage f) and the tools the tests run
#             (convert_mnist, ...: those tests/CMakeLists.txt passes as
#             CORTADO_<NAME>="$<TARGET_FILE:..>"; tools.env maps the names to
#             the copies), stripped
#   lib/      every shared library they load, found with ldd, except glibc and
#             the CUDA libraries (cudart, cuBLAS, cuDNN, NCCL, ...), which must
#             come from the GPU machine, as its driver does; libstdc++ and
#             libgcc_s in lib/cxx/, which the check uses only where the
#             machine's own are missing or older (this one may need a newer
#             glibc than the executables do)
#   models/, tests/bad_input, tests/models: the data the tests and the check read
#   scripts/  the bench helpers the check uses
#   MANIFEST  the commit, the build, the CUDA sonames and glibc version needed
# all in cortado_gpu.tar.xz, beside a copy of scripts/gpu_check.sh, which
# unpacks it there. The folder must stay under LIMIT_MIB (48): the script
# fails above it and prints the largest files.
#
# OpenCV and MPI: Debian's OpenCV image codecs pull in GDAL and ~140 other
# libraries (about 50 MiB compressed), and Open MPI loads plugins from its
# install path; the GPU check needs neither. When BUILD_DIR's configuration
# has them, this recompiles only the sources that test CORTADO_USE_OPENCV or
# CORTADO_USE_MPI against a config.hpp without them and relinks the three
# executables without those libraries (in BUILD_DIR/gpu_bundle_lean/; the
# OpenCV tools, whose tests then compile out, are left out); a
# build configured with -DUSE_OPENCV=OFF -DUSE_MPI=OFF is packed as it is.
#
# Environment: BUILD_DIR (build), BUNDLE_DIR (.gpu_bundle), LIMIT_MIB (48),
# NVJPEG_LIB (a libnvjpeg.so.N to carry in lib/; none by default),
# JOBS (all cores), XZ_LEVEL (9). Builds go through the shared lock
# /tmp/cortado-build.lock (flock) where flock exists.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUNDLE_DIR=${BUNDLE_DIR:-.gpu_bundle}
LIMIT_MIB=${LIMIT_MIB:-48}
JOBS=${JOBS:-$(nproc)}
XZ_LEVEL=${XZ_LEVEL:-9}
LOCK=/tmp/cortado-build.lock
ARCHIVE=cortado_gpu.tar.xz

say() { echo "gpu_bundle: $*"; }
die() { echo "gpu_bundle: error: $*" >&2; exit 1; }
locked() { if command -v flock >/dev/null; then flock "$LOCK" "$@"; else "$@"; fi; }

# Libraries the GPU machine provides: glibc (never mixed with another
# version's loader) and the driver and CUDA libraries.
GLIBC_RE='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|librt|libpthread|libresolv|libutil|libanl|libnsl|libBrokenLocale|libmvec)\.so'
CUDA_RE='^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc[a-z.-]*|nvJitLink|nvToolsExt|nvtx3interop|cufft[a-z]*|curand|cusparse|cusolver[A-Za-z]*|cupti|nvidia-[a-z-]*)\.so'

[ -f "$BUILD_DIR/build.ninja" ] || die "$BUILD_DIR is not a configured Ninja build (bash scripts/build.sh)"
CONFIG=$BUILD_DIR/include/cortado/config.hpp
grep -q '^#define CORTADO_USE_CUDA' "$CONFIG" || die "$BUILD_DIR has no CUDA backend: configure it with nvcc (-DUSE_CUDA=ON)"
grep -q '^BUILD_TESTS:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" || die "$BUILD_DIR is configured without tests (-DBUILD_TESTS=ON)"
archs=$(sed -n 's/^CORTADO_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
case " ${archs//;/ } " in
  *" 90 "*|*" 90a "*|*" 90-real "*|*" 90a-real "*) ;;
  *) say "warning: CORTADO_CUDA_ARCHITECTURES is '$archs': no sm_90 code for an H100/H200" ;;
esac

# The executables: trainer, the test suite, and every tool the tests run,
# which tests/CMakeLists.txt passes them as CORTADO_<NAME>="$<TARGET_FILE:tool>"
# (the environment variable of that name points the tests at the copy).
LEAN=0
grep -qE '^#define CORTADO_USE_(OPENCV|MPI)' "$CONFIG" && LEAN=1
EXES=(trainer cortado_tests)
declare -A tool_var=()
while read -r var t; do
  ninja -C "$BUILD_DIR" -t query "$t" >/dev/null 2>&1 || continue  # not in this configuration
  # An OpenCV tool cannot be relinked without OpenCV; its tests compile out.
  [ $LEAN = 1 ] && grep -q 'opencv2/' "tools/$t.cpp" 2>/dev/null && continue
  tool_var[$t]=$var
  [[ " ${EXES[*]} " == *" $t "* ]] || EXES+=("$t")
done < <(grep -oE 'CORTADO_[A-Z0-9_]+="\$<TARGET_FILE:[A-Za-z0-9_]+>"' tests/CMakeLists.txt |
         sed -E 's/^(CORTADO_[A-Z0-9_]+)="\$<TARGET_FILE:([A-Za-z0-9_]+)>"$/\1 \2/' | sort -u)
# The nvJPEG benchmark's tool (CUDA builds only), for the check's stage f.
ninja -C "$BUILD_DIR" -t query nvjpeg_decode >/dev/null 2>&1 && EXES+=(nvjpeg_decode)

say "building ${EXES[*]} in $BUILD_DIR"
locked cmake --build "$BUILD_DIR" -j "$JOBS" --target "${EXES[@]}" >/tmp/gpu_bundle_build.$$.log 2>&1 \
  || { tail -40 /tmp/gpu_bundle_build.$$.log; rm -f /tmp/gpu_bundle_build.$$.log; die "the build failed"; }
rm -f /tmp/gpu_bundle_build.$$.log

# Each executable's path, from its link command.
declare -A exe_path=()
for t in "${EXES[@]}"; do
  out=$(ninja -C "$BUILD_DIR" -t commands "$t" | tail -1 | sed -nE 's/.* -o ([^ ]+) .*/\1/p')
  [ -n "$out" ] && [ -x "$BUILD_DIR/$out" ] || die "cannot find the executable of target $t"
  exe_path[$t]=$BUILD_DIR/$out
done

# ---- the lean relink (builds with OpenCV or MPI) ------------------------------------
LEAN_NOTE="as built"
if [ $LEAN = 1 ]; then
  LEAN_DIR=$(cd "$BUILD_DIR" && pwd)/gpu_bundle_lean
  SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")
  say "$BUILD_DIR links OpenCV and/or MPI: relinking the executables without them in $LEAN_DIR"
  rm -rf "$LEAN_DIR"
  mkdir -p "$LEAN_DIR/include/cortado" "$LEAN_DIR/obj" "$LEAN_DIR/bin"
  sed -E 's,^#define (CORTADO_USE_(OPENCV|MPI))$,/* #undef \1 (GPU bundle) */,' "$CONFIG" >"$LEAN_DIR/include/cortado/config.hpp"
  # The sources whose code depends on the two switches. A header among them
  # would change every source that includes it: not handled here.
  mapfile -t switched < <(grep -rlE 'CORTADO_USE_(OPENCV|MPI)' include src tools tests --include='*.hpp' \
                           --include='*.h' --include='*.cuh' --include='*.cpp' --include='*.cu' | sort)
  for f in "${switched[@]}"; do
    case "$f" in *.hpp|*.h|*.cuh) die "$f tests CORTADO_USE_OPENCV/MPI in a header: configure a build with -DUSE_OPENCV=OFF -DUSE_MPI=OFF and pass it as BUILD_DIR" ;; esac
  done
  cp "$BUILD_DIR/libcortado.a" "$LEAN_DIR/libcortado.a"
  members=$(ar t "$LEAN_DIR/libcortado.a")
  declare -A relinked_obj=()
  # Compile commands come from ninja itself, so they carry the build's flags.
  lean_compile() {  # $1: the build's compile command of one source
    local cmd=$1 obj
    obj=$(echo "$cmd" | sed -nE 's/.* -o ([^ ]+) -c .*/\1/p')
    [ -n "$obj" ] || die "cannot read the object of: $cmd"
    [ -n "${relinked_obj[$obj]:-}" ] && return 0
    local src=${cmd##* -c }
    # Objects of one moment only: a source edited since the build would mix.
    [ "$src" -nt "$BUILD_DIR/$obj" ] && die "$src changed after $BUILD_DIR was built: run this again"
    say "  recompiling $src without OpenCV/MPI"
    local out=$LEAN_DIR/obj/${obj#CMakeFiles/}
    mkdir -p "$(dirname "$out")"
    # The lean config.hpp comes first; no dependency file.
    cmd=$(echo "$cmd" | sed -E "s| -MD -MT [^ ]+ -MF [^ ]+||; s| -o [^ ]+ -c | -o $out -c |; s|^(.*ccache )?([^ ]+) |\1\2 -I$LEAN_DIR/include |")
    (cd "$BUILD_DIR" && locked bash -c "$cmd") || die "lean compile failed: $cmd"
    relinked_obj[$obj]=$out
  }
  for t in "${EXES[@]}"; do
    cmds=$(ninja -C "$BUILD_DIR" -t commands "$t")
    for f in "${switched[@]}"; do
      line=$(echo "$cmds" | grep -F -- " -c $SRC/$f" | tail -1 || true)
      [ -n "$line" ] || continue
      lean_compile "$line"
    done
  done
  for obj in "${!relinked_obj[@]}"; do
    case "$obj" in
      CMakeFiles/cortado.dir/*)
        m=$(basename "$obj")
        [ "$(echo "$members" | grep -cxF "$m")" = 1 ] || die "libcortado.a has $(echo "$members" | grep -cxF "$m") members named $m"
        ar r "$LEAN_DIR/libcortado.a" "${relinked_obj[$obj]}" ;;
    esac
  done
  for t in "${EXES[@]}"; do
    link=$(ninja -C "$BUILD_DIR" -t commands "$t" | tail -1)
    link=${link#: && }
    link=${link% && :}
    out=$(echo "$link" | sed -nE 's/.* -o ([^ ]+) .*/\1/p')
    [ -n "$out" ] || die "cannot read the output of $t's link command"
    new=""
    set -f  # the words of the command, unglobbed
    for a in $link; do
      case "$a" in
        */libopencv_*|-lopencv_*|*/libmpi*|-lmpi*|-Wl,-rpath,*) continue ;;
        libcortado.a) a=$LEAN_DIR/libcortado.a ;;
        "$out") a=$LEAN_DIR/bin/$t ;;
      esac
      [ -n "${relinked_obj[$a]:-}" ] && a=${relinked_obj[$a]}
      new+="$a "
    done
    set +f
    say "  linking $t"
    (cd "$BUILD_DIR" && locked bash -c "$new") || die "lean link of $t failed: $new"
    exe_path[$t]=$LEAN_DIR/bin/$t
  done
  LEAN_NOTE="relinked without OpenCV and MPI (recompiled: ${switched[*]})"
fi

# ---- stage ---------------------------------------------------------------------------
STAGE=$BUNDLE_DIR/cortado_gpu
rm -rf "$BUNDLE_DIR"
mkdir -p "$STAGE/bin" "$STAGE/lib/cxx" "$STAGE/tests" "$STAGE/scripts/bench"
for t in "${EXES[@]}"; do
  cp "${exe_path[$t]}" "$STAGE/bin/$t"
  strip --strip-unneeded "$STAGE/bin/$t"
done
# The variables that point the tests at the bundle's tools (gpu_check.sh sets them).
for t in "${!tool_var[@]}"; do echo "${tool_var[$t]}=bin/$t"; done | sort >"$STAGE/tools.env"

# The libraries: the transitive closure ldd reports, less glibc and CUDA.
declare -A cuda_needed=()
missing=""
for t in "${EXES[@]}"; do
  while IFS= read -r line; do
    name=$(echo "$line" | awk '{print $1}')
    [[ "$name" =~ $GLIBC_RE ]] && continue
    if [[ "$name" =~ $CUDA_RE ]]; then cuda_needed[$name]=1; continue; fi
    case "$line" in *"not found"*) missing+=" $name"; continue ;; esac
    path=$(echo "$line" | awk '$2 == "=>" {print $3}')
    [ -n "$path" ] || continue
    dest=$STAGE/lib
    case "$name" in libstdc++.so*|libgcc_s.so*) dest=$STAGE/lib/cxx ;; esac
    [ -e "$dest/$name" ] || cp -L "$path" "$dest/$name"
  done < <(ldd "${exe_path[$t]}")
done
[ -z "$missing" ] || die "ldd finds no$missing here"
chmod u+w "$STAGE"/lib/*.so* "$STAGE"/lib/cxx/*
strip --strip-unneeded "$STAGE"/lib/*.so* "$STAGE"/lib/cxx/* 2>/dev/null || true

# nvJPEG is opened at run time (data/nvjpeg_batch.hpp) and is not part of
# every CUDA installation: NVJPEG_LIB names a libnvjpeg.so.N to carry (the
# nvidia-nvjpeg wheel's needs nothing beyond libc), so that the nvJPEG tests
# run instead of skipping where the GPU machine has none.
if [ -n "${NVJPEG_LIB:-}" ]; then
  [ -f "$NVJPEG_LIB" ] || die "NVJPEG_LIB=$NVJPEG_LIB: no such file"
  cp -L "$NVJPEG_LIB" "$STAGE/lib/$(basename "$NVJPEG_LIB")"
  strip --strip-unneeded "$STAGE/lib/$(basename "$NVJPEG_LIB")" 2>/dev/null || true
fi

cp -r models "$STAGE/models"
cp -r tests/bad_input tests/models "$STAGE/tests/"
cp scripts/bench/lib.sh scripts/bench/resnet50_pytorch.py scripts/bench/imagenet_jpegs.py scripts/bench/trainer_variants.sh \
  scripts/bench/resnet50_train_check.sh "$STAGE/scripts/bench/"

# What the GPU machine must provide, and what was built.
glibc_of() { for f in "$@"; do objdump -T "$f" 2>/dev/null; done | grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sort -t. -k2,2n -u | tail -1; }
glibc=$(glibc_of "$STAGE"/bin/* "$STAGE"/lib/*.so*)
glibc_cxx=$(glibc_of "$STAGE"/lib/cxx/*)
{
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cuda_architectures: $archs"
  echo "nvcc: $(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")/\1/p' "$BUILD_DIR"/CMakeFiles/*/CMakeCUDACompiler.cmake | tail -1)"
  echo "executables: ${EXES[*]} ($LEAN_NOTE)"
  echo "cuda_libraries: $(echo "${!cuda_needed[@]}" | tr ' ' '\n' | sort | tr '\n' ' ')"
  echo "glibc_needed: ${glibc#GLIBC_} (lib/cxx: ${glibc_cxx#GLIBC_})"
  echo "libraries: $(ls "$STAGE"/lib/*.so* | wc -l) in lib/, $(ls "$STAGE"/lib/cxx | wc -l) in lib/cxx/"
} >"$STAGE/MANIFEST"

say "compressing (xz -$XZ_LEVEL)"
tar -C "$BUNDLE_DIR" --owner=0 --group=0 --sort=name -cf - cortado_gpu |
  xz -"$XZ_LEVEL" -T"$JOBS" >"$BUNDLE_DIR/$ARCHIVE"
cp "$STAGE/MANIFEST" "$BUNDLE_DIR/MANIFEST"
cp scripts/gpu_check.sh "$BUNDLE_DIR/gpu_check.sh"
raw_bytes=$(du -sb "$STAGE" | cut -f1)
rm -rf "$STAGE"

bytes=$(du -sb "$BUNDLE_DIR" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
raw_mib=$(awk -v b="$raw_bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
cat "$BUNDLE_DIR/MANIFEST"
say "$BUNDLE_DIR: $mib MiB ($raw_mib MiB unpacked), limit $LIMIT_MIB MiB"
if awk -v b="$bytes" -v l="$LIMIT_MIB" 'BEGIN { exit !(b > l * 1048576) }'; then
  say "the largest files, unpacked:"
  mkdir -p "$BUNDLE_DIR/.size" && tar -xJf "$BUNDLE_DIR/$ARCHIVE" -C "$BUNDLE_DIR/.size"
  find "$BUNDLE_DIR/.size" -type f -printf '%s %P\n' | sort -rn | head -15 | awk '{ printf "  %7.1f MiB %s\n", $1 / 1048576, $2 }'
  rm -rf "$BUNDLE_DIR/.size"
  die "$BUNDLE_DIR is $mib MiB, over $LIMIT_MIB MiB"
fi
say "done. Carry $BUNDLE_DIR/ to the GPU machine and run there: bash $BUNDLE_DIR/gpu_check.sh"
