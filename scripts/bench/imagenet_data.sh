#!/usr/bin/env bash
# The ImageNet input pipeline on the host: how many images per second the
# Data layer reads, decodes (JPEG), crops, mirrors, mean-subtracts and
# converts, for several transform thread counts (data_param.threads).
#
# Makes IMAGES synthetic photo-like 500x375 images (smooth colour fields
# with texture, numpy), converts them like data/ilsvrc12/create_lmdb.sh
# (convert_imageset, resize 256x256, shuffled, JPEG records), then runs
# `trainer time` on a net of that Data layer (batch BATCH, TRAIN: random
# 224 crop, mirror, mean_value 104 117 123) and a Silence layer, FP32 and
# FP16 output, REPEATS runs of ITERS batches each. The layer prefetches in
# the background, so its forward time is the time to produce a batch; the
# median over runs gives images/s for each thread count, and images/s per
# thread, the number to multiply by a GPU machine's cores to see whether it
# can feed ResNet-50.
#
# Environment: BUILD_DIR (build), IMAGES (512), BATCH (128), ITERS (10),
# REPEATS (3), THREADS ("1 2 ... up to the cores", space-separated), PYTHON
# (python3 with numpy).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=$BUILD_DIR/tools/trainer
CONVERT=$BUILD_DIR/tools/convert_imageset
IMAGES=${IMAGES:-512}
BATCH=${BATCH:-128}
ITERS=${ITERS:-10}
REPEATS=${REPEATS:-3}
if [ -z "${THREADS:-}" ]; then
  THREADS="1"
  t=2
  while [ "$t" -le "$(nproc)" ]; do THREADS+=" $t"; t=$((t * 2)); done
  [ "$(nproc)" -gt 1 ] && [ "$((t / 2))" != "$(nproc)" ] && THREADS+=" $(nproc)"
fi
[ -x "$TRAINER" ] || { echo "imagenet_data: $TRAINER not found; build first" >&2; exit 1; }
[ -x "$CONVERT" ] || { echo "imagenet_data: $CONVERT not found (it needs an OpenCV build)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Debian's python3-numpy (scripts/install_deps.sh); a python3 first on PATH
# without numpy (a virtualenv) gives way to the system's.
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import numpy' 2>/dev/null && [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; fi
"$PYTHON" - "$tmp/images" "$IMAGES" <<'PY'
import os, sys
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
rng = np.random.default_rng(1)
h, w = 375, 500
with open(os.path.join(out, "list.txt"), "w") as lst:
    for i in range(n):
        # Low-frequency colour fields (upsampled coarse noise) plus fine texture:
        # JPEG sizes and decode work closer to photos than flat or pure noise.
        coarse = rng.random((h // 25 + 1, w // 25 + 1, 3)) * 255
        img = np.kron(coarse, np.ones((25, 25, 1)))[:h, :w]
        yy, xx = np.mgrid[0:h, 0:w]
        img = img * 0.7 + 40 * np.sin(xx / (5 + i % 7))[..., None] + rng.normal(0, 12, (h, w, 3))
        img = np.clip(img, 0, 255).astype(np.uint8)
        name = "img%05d.ppm" % i
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"P6\n%d %d\n255\n" % (w, h))
            f.write(img.tobytes())
        lst.write("%s %d\n" % (name, i % 1000))
PY
"$CONVERT" --resize_height=256 --resize_width=256 --shuffle --encode_type=jpg "$tmp/images/" "$tmp/images/list.txt" \
  "$tmp/lmdb" > "$tmp/convert.log" 2>&1 || { tail -5 "$tmp/convert.log" >&2; exit 1; }
db_bytes=$(du -sb "$tmp/lmdb" | cut -f1)
echo "imagenet_data: $IMAGES JPEG records of 256x256, $((db_bytes / IMAGES / 1024)) KiB each on average (LMDB included)"

for type in FLOAT FLOAT16; do
  for th in $THREADS; do
    cat > "$tmp/net_${type}_$th.prototxt" <<NET
name: "imagenet_data"
default_forward_type: $type
default_backward_type: $type
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { mirror: true crop_size: 224 mean_value: 104 mean_value: 117 mean_value: 123 }
  data_param { source: "$tmp/lmdb" batch_size: $BATCH threads: $th } }
layer { name: "silence" type: "Silence" bottom: "data" bottom: "label" }
NET
  done
done
printf '%-8s %8s %14s %14s %18s\n' output threads "ms/batch" "images/s" "images/s/thread"
for type in FLOAT FLOAT16; do
  for th in $THREADS; do
    runs=""
    for r in $(seq 1 "$REPEATS"); do
      out=$("$TRAINER" time --model="$tmp/net_${type}_$th.prototxt" --iterations="$ITERS" --warmup=6 2>"$tmp/time.log" \
            | grep '^time:') || { tail -5 "$tmp/time.log" >&2; exit 1; }
      runs+="$(kv forward_ms_median "$out") "
    done
    ms=$(echo "$runs" | tr ' ' '\n' | grep . | median)
    ips=$(awk -v m="$ms" -v b="$BATCH" 'BEGIN { printf "%.0f", b * 1000 / m }')
    printf '%-8s %8s %14s %14s %18s\n' "$type" "$th" "$ms" "$ips" "$(awk -v i="$ips" -v t="$th" 'BEGIN { printf "%.0f", i / t }')"
  done
done
echo "imagenet_data: batch=$BATCH images=$IMAGES iterations=$ITERS repeats=$REPEATS threads=\"$THREADS\" cores=$(nproc)"
