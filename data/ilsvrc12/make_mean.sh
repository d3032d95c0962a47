#!/usr/bin/env bash
# Computes the mean image of the ImageNet training database (made by
# create_lmdb.sh) into data/ilsvrc12/imagenet_mean.binaryproto, the file a
# Data layer's transform_param.mean_file reads; also prints the mean of each
# channel (for transform_param.mean_value).
#
# Environment: TRAIN_LMDB (default data/ilsvrc12/ilsvrc12_train_lmdb),
# BUILD_DIR (default build/ in the repository).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
tool="$build/tools/compute_image_mean"
db="${TRAIN_LMDB:-$here/ilsvrc12_train_lmdb}"
out="$here/imagenet_mean.binaryproto"

if [[ ! -x "$tool" ]]; then
  echo "error: $tool not found; build it (cmake --build build --target compute_image_mean;" \
    "it needs OpenCV) or set BUILD_DIR to your build directory." >&2
  exit 1
fi
if [[ ! -d "$db" ]]; then
  echo "error: $db not found; run data/ilsvrc12/create_lmdb.sh first (or set TRAIN_LMDB)." >&2
  exit 1
fi

GLOG_logtostderr=1 "$tool" "$db" "$out"
echo "Done: $out"
