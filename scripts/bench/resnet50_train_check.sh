#!/usr/bin/env bash
# Does ResNet-50 learn, with every optimisation on? Trains models/resnet50 and
# models/resnet50_nvcaffe (their train_val nets as shipped, in --precision=$PREC: layer
# fusion, the memory plans, cuDNN where there is a GPU) for ITERS iterations
# on a small LMDB of real JPEG data made here, and checks that the loss falls.
#
# 1. IMAGES ImageNet-like JPEGs (scripts/bench/imagenet_jpegs.py: no data set
#    download), labelled by what a net can learn from them: 9 classes, the
#    colour channel with the highest mean times the brightness tercile.
# 2. convert_imageset --encoded --shuffle --resize_height 256 --resize_width
#    256 (Caffe's ImageNet recipe), so that the nets' 224 crops fit.
# 3. For each model: its net with the LMDB as the source of both phases and
#    batch BATCH, and a solver of its own (SGD, momentum 0.9, weight decay
#    1e-4, base_lr LR fixed, --precision's loss scaling, no test,
#    no snapshot), `trainer train`; the displayed loss (average_loss 10)
#    every 10 iterations.
# A model passes when the mean of its last three displayed losses is below
# FALL (0.75) times its first displayed loss. Last, one key=value line
# (resnet50_train_check: ...). Exit status 0 when every model passed.
#
# Environment: GPU (0; "cpu" trains on the CPU, for a smoke run such as
# GPU=cpu BATCH=2 ITERS=30 IMAGES=48), BATCH (32), ITERS (200), IMAGES (512),
# PREC (fp16; the trainer's --precision: fp32, fp16 or bf16), LR
# (0.00025 * BATCH: the ResNet recipe's 0.1 at 256 scaled down, without its
# warm-up; at batch 4 on the CPU 0.01 diverged), FALL (0.75), MODELS ("resnet50 resnet50_nvcaffe"), BUILD_DIR
# (build), TRAINER and CONVERT (the build's tools), PYTHON (python3 with
# numpy and PIL), WORK_DIR (a temporary folder, kept and printed; images
# and LMDB found there are used again). PREPARE_ONLY=1 makes the LMDB, removes
# the images and stops: the GPU bundle has no convert_imageset (it is built
# without OpenCV), so make WORK_DIR on the build machine, carry it, and run
#   TRAINER=bin/trainer WORK_DIR=<carried> bash scripts/bench/resnet50_train_check.sh
# from the unpacked bundle. .gpu_data/ is the folder git ignores for this:
#   PREPARE_ONLY=1 WORK_DIR=.gpu_data bash scripts/bench/resnet50_train_check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
GPU=${GPU:-0}
BATCH=${BATCH:-32}
ITERS=${ITERS:-200}
IMAGES=${IMAGES:-512}
PREC=${PREC:-fp16}
LR=${LR:-$(awk -v b="$BATCH" 'BEGIN { print 0.00025 * b }')}
FALL=${FALL:-0.75}
MODELS=${MODELS:-resnet50 resnet50_nvcaffe}
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=${TRAINER:-$BUILD_DIR/tools/trainer}
CONVERT=${CONVERT:-$BUILD_DIR/tools/convert_imageset}
PYTHON=${PYTHON:-python3}
# numpy and PIL (Debian's python3-numpy, python3-pil, which install_deps.sh
# installs): PYTHON when it has them, else the system's python3.
"$PYTHON" -c 'import numpy, PIL' 2>/dev/null || PYTHON=/usr/bin/python3
WORK_DIR=${WORK_DIR:-$(mktemp -d)}
mkdir -p "$WORK_DIR"
lmdb=$WORK_DIR/lmdb
for tool in "$TRAINER" "$CONVERT"; do
  [ "$tool" = "$CONVERT" ] && [ -d "$lmdb" ] && continue  # made before
  [ -x "$tool" ] || { echo "resnet50_train_check: $tool not found (build first: scripts/build.sh)" >&2; exit 1; }
done
case "$PREC" in
  fp32 | fp16 | bf16) ;;
  *) echo "resnet50_train_check: PREC must be fp32, fp16 or bf16, got '$PREC'" >&2; exit 1 ;;
esac
gpu_flag=()
where=CPU
if [ "$GPU" != cpu ]; then
  gpu_flag=(--gpu="$GPU")
  where="GPU $GPU"
fi

# 1. The images and their learnable labels (not needed where the LMDB is made).
if [ ! -d "$lmdb" ] && [ ! -f "$WORK_DIR/images/labels.txt" ]; then
  "$PYTHON" scripts/bench/imagenet_jpegs.py "$WORK_DIR/images" "$IMAGES"
  "$PYTHON" - "$WORK_DIR/images" <<'EOF'
import os, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
names = [l.split()[0] for l in open(os.path.join(d, "list.txt"))]
means = np.array([np.asarray(Image.open(os.path.join(d, n)).convert("RGB"), np.float64).mean((0, 1)) for n in names])
bright = means.mean(1)
terciles = np.quantile(bright, [1 / 3, 2 / 3])
labels = means.argmax(1) * 3 + np.searchsorted(terciles, bright)
with open(os.path.join(d, "labels.txt"), "w") as f:
    for n, l in zip(names, labels):
        f.write("%s %d\n" % (n, l))
print("resnet50_train_check: %d images in classes %s" % (len(names), np.bincount(labels, minlength=9).tolist()))
EOF
fi
# 2. The LMDB.
if [ ! -d "$lmdb" ]; then
  "$CONVERT" --encoded --shuffle --resize_height=256 --resize_width=256 "$WORK_DIR/images/" \
    "$WORK_DIR/images/labels.txt" "$lmdb" >"$WORK_DIR/convert.log" 2>&1 ||
    { echo "resnet50_train_check: convert_imageset failed, see $WORK_DIR/convert.log" >&2; exit 1; }
fi
if [ "${PREPARE_ONLY:-0}" = 1 ]; then  # a folder to carry: the LMDB alone (about a third of the size)
  rm -rf "$WORK_DIR/images"
  echo "resnet50_train_check: LMDB in $WORK_DIR ($(du -sh "$WORK_DIR" | cut -f1))"
  exit 0
fi

# 3. Train each model.
summary=()
status=0
for model in $MODELS; do
  src=models/$model/train_val.prototxt
  [ -f "$src" ] || { echo "resnet50_train_check: $src not found" >&2; exit 1; }
  net=$WORK_DIR/${model}_net.prototxt
  sed -e "s#source: \".*\"#source: \"$lmdb\"#" -e "s#batch_size: [0-9]*#batch_size: $BATCH#" "$src" >"$net"
  solver=$WORK_DIR/${model}_solver.prototxt
  cat >"$solver" <<EOF
net: "$net"
test_iter: 1
test_interval: $((ITERS + 1))
test_initialization: false
base_lr: $LR
lr_policy: "fixed"
momentum: 0.9
weight_decay: 0.0001
display: 10
average_loss: 10
max_iter: $ITERS
snapshot_after_train: false
random_seed: 1
EOF
  log=$WORK_DIR/${model}.log
  echo "resnet50_train_check: $model ($PREC, batch $BATCH, $ITERS iterations, $where): log $log"
  # --precision sets the types and, for fp16, dynamic loss scaling (the solver above states neither).
  if ! "$TRAINER" train --solver="$solver" --precision="$PREC" "${gpu_flag[@]}" >"$log" 2>&1; then
    echo "resnet50_train_check: $model: trainer failed; its last lines:" >&2
    tail -5 "$log" >&2
    summary+=("$model=failed")
    status=1
    continue
  fi
  losses=$(sed -n 's/.*Iteration \([0-9]*\), loss = \([-0-9.eE+naif]*\).*/\2/p' "$log" | tr '\n' ' ')
  verdict=$(awk -v fall="$FALL" -v losses="$losses" 'BEGIN {
    n = split(losses, l, " ")
    if (n < 4) { print "too_few_displays"; exit }
    last = (l[n] + l[n - 1] + l[n - 2]) / 3
    printf "%s first=%.4f last3=%.4f", (last < fall * l[1] ? "falls" : "does_not_fall"), l[1], last }')
  echo "  losses: $losses"
  echo "  $verdict"
  case "$verdict" in falls*) ;; *) status=1 ;; esac
  summary+=("$model=$(echo "$verdict" | tr ' ' ',')")
done
echo "resnet50_train_check: prec=$PREC batch=$BATCH iters=$ITERS gpu=$GPU ${summary[*]} work_dir=$WORK_DIR"
exit $status
