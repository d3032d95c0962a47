#!/usr/bin/env bash
# GPU JPEG decoding (nvJPEG; data/nvjpeg_batch.hpp): images/s of decoding and
# transforming batches of ImageNet-like JPEGs on the device, as the ResNet
# recipe's training input (random-resized crop 224, mirror, mean_value,
# scale) in TYPE.
#
# 1. Makes IMAGES ImageNet-like JPEGs with scripts/bench/imagenet_jpegs.py
#    (the files of imagenet_data.sh: about 400x350, quality 90, 4:2:0), or
#    uses IMAGES_DIR, a folder holding them and their list.txt (imagenet_data.sh
#    with KEEP=dir leaves them in dir/images).
# 2. Runs tools/nvjpeg_decode at batch BATCH: WARM batches, then ITERS timed
#    ones, REPEATS times; prints each run's line (device, nvJPEG library,
#    backend: hardware engine or default, images/s, ms per batch, records the
#    CPU had to transform) and the median images/s.
# Without a CUDA build (no tools/nvjpeg_decode), a CUDA device or nvJPEG it
# says so and exits 0.
#
# Environment: BUILD_DIR (build), IMAGES (1024), IMAGES_DIR, BATCH (256),
# ITERS (20), WARM (3), REPEATS (3), TYPE (FLOAT16), PYTHON (python3 with
# numpy and PIL, for the images).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TOOL=$BUILD_DIR/tools/nvjpeg_decode
IMAGES=${IMAGES:-1024}
BATCH=${BATCH:-256}
ITERS=${ITERS:-20}
WARM=${WARM:-3}
REPEATS=${REPEATS:-3}
TYPE=${TYPE:-FLOAT16}
PYTHON=${PYTHON:-python3}
if [ ! -x "$TOOL" ]; then
  echo "nvjpeg_decode: skipped: $TOOL not found (it is built in CUDA builds only)"
  exit 0
fi
probe=$("$TOOL" --iters=0 --warmup=0 /dev/null 2>&1 || true)
case $probe in
  *skipped:*) printf '%s\n' "$probe"; exit 0 ;;
esac

if [ -n "${IMAGES_DIR:-}" ]; then
  dir=$IMAGES_DIR
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  dir=$tmp/images
  "$PYTHON" -c 'import numpy, PIL' 2>/dev/null || PYTHON=/usr/bin/python3
  "$PYTHON" scripts/bench/imagenet_jpegs.py "$dir" "$IMAGES"
fi
[ -f "$dir/list.txt" ] || { echo "nvjpeg_decode: $dir/list.txt not found" >&2; exit 1; }
echo "nvjpeg_decode: $(wc -l < "$dir/list.txt") JPEGs in $dir, $(du -sk "$dir" | cut -f1) KB"

rates=()
for r in $(seq "$REPEATS"); do
  line=$("$TOOL" --batch="$BATCH" --iters="$ITERS" --warmup="$WARM" --type="$TYPE" "$dir/list.txt")
  echo "$line"
  rates+=("$(kv images_per_s "$line")")
done
echo "nvjpeg_decode: batch=$BATCH type=$TYPE images_per_s_median=$(printf '%s\n' "${rates[@]}" | median %.1f)"
