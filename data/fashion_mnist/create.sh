#!/usr/bin/env bash
# Creates data/fashion_mnist/train_lmdb and test_lmdb (Caffe Datum records,
# 1x28x28 uint8, labels 0-9) from the Fashion-MNIST IDX files.
#
# Source files (gzipped or not): FASHION_MNIST_DIR, default the Debian package
# dataset-fashion-mnist's /usr/share/datasets/fashion-mnist. Converter:
# $BUILD_DIR/tools/convert_mnist (BUILD_DIR defaults to build/ in the
# repository). Idempotent: does nothing when both databases exist. Each
# database is written under a temporary name and renamed when complete, so an
# interrupted run leaves nothing that looks finished.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
build="${BUILD_DIR:-$root/build}"
convert="$build/tools/convert_mnist"

if [[ -d "$here/train_lmdb" && -d "$here/test_lmdb" ]]; then
  echo "Fashion-MNIST LMDBs already exist in $here; nothing to do."
  exit 0
fi

if [[ ! -x "$convert" ]]; then
  echo "error: $convert not found; build it first (cmake --build build --target convert_mnist)" >&2
  echo "       or set BUILD_DIR to your build directory." >&2
  exit 1
fi

# Finds <stem> or <stem>.gz in the source directory.
find_idx() {
  local stem="$1"
  for f in "$src/$stem" "$src/$stem.gz"; do
    if [[ -f "$f" ]]; then echo "$f"; return 0; fi
  done
  echo "error: neither $src/$stem nor $src/$stem.gz exists." >&2
  echo "       Install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist)" >&2
  echo "       or set FASHION_MNIST_DIR to a directory holding the Fashion-MNIST IDX files." >&2
  return 1
}

convert_split() {
  local images="$1" labels="$2" out="$3"
  if [[ -d "$out" ]]; then
    echo "$out exists; skipping."
    return 0
  fi
  local tmp="$out.$$.tmp"
  rm -rf "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  "$convert" "$images" "$labels" "$tmp"
  mv "$tmp" "$out"
  trap - EXIT
}

train_images="$(find_idx train-images-idx3-ubyte)"
train_labels="$(find_idx train-labels-idx1-ubyte)"
test_images="$(find_idx t10k-images-idx3-ubyte)"
test_labels="$(find_idx t10k-labels-idx1-ubyte)"

echo "Converting Fashion-MNIST from $src"
convert_split "$train_images" "$train_labels" "$here/train_lmdb"
convert_split "$test_images" "$test_labels" "$here/test_lmdb"
echo "Done: $here/train_lmdb and $here/test_lmdb"
