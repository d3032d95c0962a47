#!/usr/bin/env bash
# Prepares .deps/ for scripts/gpu_check.sh, on a build machine with Debian 12
# and access to Debian's archive (no root needed).
#
# A GPU test machine has nvcc, CMake and ninja but none of Debian's -dev
# packages and no network. This downloads (apt-get download: no install, no
# root) the .deb files that building and running Cortado without OpenCV
# needs, plus Debian's Fashion-MNIST, into .deps/debs/. gpu_check.sh unpacks
# them into .deps/prefix/ on the GPU machine (dpkg -x, never into /).
#
# Carry .deps/ with the repository: both together must stay under 64 MiB, so
# this fails above 64 MiB for .deps/debs alone and prints the total.
#
# The list is explicit and was worked out from `apt-cache depends` and `ldd`
# on Debian 12 (bookworm); at the end the script unpacks everything into a
# scratch prefix and checks with ldd that every shared library and protoc find
# their dependencies in that prefix or in the base C/C++ runtime that every
# Linux machine has (libc, libm, libstdc++, libgcc_s, liblzma...). Run it again
# after changing the list.
set -euo pipefail
cd "$(dirname "$0")/.."

DEPS_DIR=${DEPS_DIR:-.deps}
LIMIT_MIB=${LIMIT_MIB:-64}

PACKAGES=(
  # protoc (build time) and its libraries; headers and libprotobuf.so.
  protobuf-compiler libprotoc32 libprotobuf32 libprotobuf-lite32 libprotobuf-dev
  # glog: its CMake config finds gflags and libunwind (FindUnwind needs
  # libunwind.h and libunwind.so, so libunwind-dev; its liblzma-dev dependency
  # is only for static linking and is left out).
  libgoogle-glog-dev libgoogle-glog0v6 libunwind8 libunwind-dev
  libgflags-dev libgflags2.2
  liblmdb-dev liblmdb0
  # OpenBLAS, pthread flavour: cblas.h and libopenblas.so live under
  # .../openblas-pthread/ (Debian's alternatives are not set up by dpkg -x;
  # gpu_check.sh points CMake at them). libopenblas-dev itself is an empty
  # metapackage and is not needed. OpenBLAS needs libgfortran5 (-> libquadmath0).
  libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0
  # convert_mnist reads gzipped IDX files. zlib1g-dev's libz.so is an absolute
  # link to /lib/...; gpu_check.sh re-points such links into the prefix.
  zlib1g-dev zlib1g
  # GoogleTest: static libgtest.a, headers, CMake config (googletest, the
  # source package it depends on, is not needed).
  libgtest-dev
  # The data: four .gz IDX files under usr/share/datasets/fashion-mnist (~30 MB).
  dataset-fashion-mnist
)

# Shared libraries a GPU machine is expected to have without Debian's packages.
BASE_LIBS='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+\.so|libgcc_s\.so|liblzma\.so)'

command -v apt-get >/dev/null || { echo "gpu_prepare: apt-get not found: run this on a Debian 12 build machine" >&2; exit 1; }
if [ -r /etc/os-release ] && ! grep -q 'VERSION_CODENAME=bookworm' /etc/os-release; then
  echo "gpu_prepare: warning: this is not Debian 12 (bookworm); the list was made for bookworm" >&2
fi

mkdir -p "$DEPS_DIR"
tmp=$(mktemp -d "$DEPS_DIR/debs.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "gpu_prepare: downloading ${#PACKAGES[@]} packages into $DEPS_DIR/debs"
# apt-get download writes into the current directory; as a non-root user it
# needs no privileges (it may warn that it runs unsandboxed).
if ! (cd "$tmp" && apt-get download -q "${PACKAGES[@]}" 2>&1 | grep -v '^Get:' | grep -v 'unsandboxed' >&2; exit "${PIPESTATUS[0]}"); then
  echo "gpu_prepare: apt-get download failed; if a package is unknown, run 'apt-get update' first" >&2
  exit 1
fi
for p in "${PACKAGES[@]}"; do
  ls "$tmp/${p}_"*.deb >/dev/null 2>&1 || { echo "gpu_prepare: $p was not downloaded" >&2; exit 1; }
done
rm -rf "$DEPS_DIR/debs" "$DEPS_DIR/prefix"
mv "$tmp" "$DEPS_DIR/debs"
trap - EXIT

# Check the closure: unpack into a scratch prefix and ldd everything.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for d in "$DEPS_DIR"/debs/*.deb; do dpkg-deb -x "$d" "$scratch"; done
libdirs=$(find "$scratch" -type d \( -path '*/lib/*-linux-gnu' -o -path '*/lib/*-linux-gnu/openblas-pthread' \) | tr '\n' ':')
missing=0
while IFS= read -r f; do
  out=$(LD_LIBRARY_PATH="$libdirs" ldd "$f" 2>&1) || continue
  while IFS= read -r line; do
    name=$(echo "$line" | awk '{print $1}')
    [ -z "$name" ] && continue
    case "$line" in
      *"not found"*) echo "gpu_prepare: $f: $name not found" >&2; missing=1; continue ;;
    esac
    where=$(echo "$line" | awk '$2 == "=>" {print $3}')
    if [ -n "$where" ] && [[ "$where" != "$scratch"* ]] && ! [[ "$name" =~ $BASE_LIBS ]]; then
      echo "gpu_prepare: $f needs $name, found only outside the prefix ($where)" >&2
      missing=1
    fi
  done <<<"$out"
done < <(find "$scratch" -type f \( -name '*.so*' -o -path '*/usr/bin/*' \))
[ $missing -eq 0 ] || { echo "gpu_prepare: add the packages above to PACKAGES" >&2; exit 1; }
echo "gpu_prepare: ldd check passed: every library and protoc resolves inside the prefix or the base C/C++ runtime"

bytes=$(du -cb "$DEPS_DIR"/debs/*.deb | tail -1 | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
repo_bytes=$(git ls-files -z --cached --others --exclude-standard 2>/dev/null | xargs -0 du -cb 2>/dev/null | awk '/total$/ {s += $1} END {print s + 0}')
repo_mib=$(awk -v b="$repo_bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "gpu_prepare: $(ls "$DEPS_DIR"/debs/*.deb | wc -l) .deb files, $mib MiB in $DEPS_DIR/debs (repository files: $repo_mib MiB)"
if awk -v b="$bytes" -v l="$LIMIT_MIB" 'BEGIN { exit !(b > l * 1048576) }'; then
  echo "gpu_prepare: error: $DEPS_DIR/debs is $mib MiB, over the $LIMIT_MIB MiB that can be carried" >&2
  exit 1
fi
if awk -v b="$((bytes + repo_bytes))" -v l="$LIMIT_MIB" 'BEGIN { exit !(b > l * 1048576) }'; then
  echo "gpu_prepare: warning: $DEPS_DIR/debs plus the repository files exceed $LIMIT_MIB MiB" >&2
fi
echo "gpu_prepare: done. Carry $DEPS_DIR/ with the repository to the GPU machine and run: bash scripts/gpu_check.sh"
