#!/usr/bin/env bash
# Converts the ILSVRC2012 (ImageNet) training and validation images into
# data/ilsvrc12/ilsvrc12_train_lmdb and ilsvrc12_val_lmdb: Caffe Datum
# records, resized to 256x256, in shuffled order, with tools/convert_imageset.
# See data/ilsvrc12/README.md for what to download first.
#
# Environment:
#   TRAIN_DATA_ROOT  the extracted training images (one folder per synset,
#                    as train.txt names them: n01440764/n01440764_10026.JPEG)   [required]
#   VAL_DATA_ROOT    the extracted validation images (ILSVRC2012_val_00000001.JPEG ...)  [required]
#   TRAIN_LIST, VAL_LIST  the label lists (default data/ilsvrc12/train.txt and val.txt)
#   RESIZE_WIDTH, RESIZE_HEIGHT  default 256 each; 0 and 0 keep the images' own sizes
#   CONVERT_FLAGS    more convert_imageset flags, e.g. "--encoded" (store JPEG
#                    bytes: a few times smaller; resized images are re-encoded)
#   BUILD_DIR        where the tools were built (default build/ in the repository)
#
# A database that already exists is left alone (delete it to redo it).
# convert_imageset writes each one under a temporary name and renames it when
# complete, so an interrupted run leaves nothing that looks finished.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
convert="$build/tools/convert_imageset"
train_list="${TRAIN_LIST:-$here/train.txt}"
val_list="${VAL_LIST:-$here/val.txt}"
width="${RESIZE_WIDTH:-256}"
height="${RESIZE_HEIGHT:-256}"
read -r -a extra <<< "${CONVERT_FLAGS:-}"

die() {
  echo "error: $*" >&2
  exit 1
}

[[ -x "$convert" ]] || die "$convert not found; build it (cmake --build build --target convert_imageset;" \
  "it needs OpenCV) or set BUILD_DIR to your build directory."
[[ -n "${TRAIN_DATA_ROOT:-}" ]] || die "set TRAIN_DATA_ROOT to the folder of the extracted training images" \
  "(see $here/README.md)."
[[ -n "${VAL_DATA_ROOT:-}" ]] || die "set VAL_DATA_ROOT to the folder of the extracted validation images" \
  "(see $here/README.md)."
[[ -d "$TRAIN_DATA_ROOT" ]] || die "TRAIN_DATA_ROOT=$TRAIN_DATA_ROOT is not a directory."
[[ -d "$VAL_DATA_ROOT" ]] || die "VAL_DATA_ROOT=$VAL_DATA_ROOT is not a directory."
[[ -f "$train_list" ]] || die "$train_list not found: the training label list (see $here/README.md)."
[[ -f "$val_list" ]] || die "$val_list not found: the validation label list (see $here/README.md)."

resize=()
if [[ "$width" != 0 || "$height" != 0 ]]; then
  resize=(--resize_width="$width" --resize_height="$height")
fi

convert_split() {
  local data_root="$1" list="$2" out="$3"
  if [[ -d "$out" ]]; then
    echo "$out exists; skipping."
    return 0
  fi
  echo "Creating $out from $list"
  GLOG_logtostderr=1 "$convert" "${resize[@]}" --shuffle "${extra[@]}" "${data_root%/}/" "$list" "$out"
}

convert_split "$TRAIN_DATA_ROOT" "$train_list" "$here/ilsvrc12_train_lmdb"
convert_split "$VAL_DATA_ROOT" "$val_list" "$here/ilsvrc12_val_lmdb"
echo "Done: $here/ilsvrc12_train_lmdb and $here/ilsvrc12_val_lmdb"
