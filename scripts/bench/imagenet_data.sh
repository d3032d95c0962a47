#!/usr/bin/env bash
# The ImageNet input pipeline on the host, against PyTorch's DataLoader: how
# many images per second the Data layer alone reads, decodes (JPEG), crops
# and resizes (the random-resized crop of the ResNet recipe), mirrors,
# normalizes and writes in the net's type, at 1 thread and at all cores.
#
# 1. Makes IMAGES ImageNet-like JPEGs (no data set download): sizes spread
#    around ImageNet's average of about 400x350 (area log-normal, 70%
#    landscape 1.2-1.6:1, 20% portrait, 10% near square), photo-like content
#    (1/f noise colour fields, the statistics of natural images, plus sensor
#    grain), quality 90 with 4:2:0 chroma (PIL's defaults), about 110 KB a
#    file like ImageNet's training set. It prints the measured average size
#    and dimensions.
# 2. Converts them with convert_imageset --encoded --shuffle, without
#    resizing: the records hold the JPEG files' own bytes.
# 3. Cortado: `trainer time` on a net of the Data layer (batch BATCH, TRAIN,
#    transform_param: crop_size 224, rand_crop_area_lower 0.08 (the
#    random-resized crop with torchvision's ranges), mirror, mean_value and
#    scale) and a Silence layer, output in TYPE (FLOAT16), data_param.threads
#    T. The net takes batches much faster than the layer's workers make them,
#    so the run's wall time is the time to make them: each timed iteration
#    of `trainer time` takes two batches (the whole pass and the
#    layer-by-layer pass), so two runs of ITERS and 2 * ITERS iterations
#    differ by 2 * ITERS batches, and images/s = 2 * ITERS * BATCH / (the
#    difference of their wall times): start-up, the first record's decode,
#    the warm-up and the prefetched head start cancel. (The median forward
#    time would be one worker's time for a batch, not the rate of T
#    workers.)
# 4. PyTorch (when PYTHON has torch and torchvision): a DataLoader over the
#    same JPEG files, decoded each way of TORCH_DECODERS: pil is
#    ImageFolder's default loading (torchvision's default image backend,
#    PIL.Image.open + convert("RGB")), io is torchvision.io.decode_jpeg on
#    the file's bytes with the transforms on uint8 tensors (on this kind of
#    machine the faster of the two); RandomResizedCrop(224) +
#    RandomHorizontalFlip + ToTensor (or ConvertImageDtype) + Normalize,
#    batch BATCH, num_workers T, shuffled; images/s over BATCHES batches
#    after WARM batches (the workers started and their prefetch used up).
#    The ratio compares Cortado with the faster PyTorch decoder.
# For T = 1 both run on one core (taskset -c 0: the worker and the process
# that waits for it); for T = all cores on all of them. Runs alternate
# (Cortado T, PyTorch T, ...) REPEATS times; the table gives medians,
# images/s per core (T) and Cortado / PyTorch. The load average before and
# after is printed: other work on the machine slows both sides.
#
# Environment: BUILD_DIR (build), IMAGES (1000), BATCH (128), ITERS (6),
# REPEATS (5), BATCHES (12), WARM (3), TYPE (FLOAT16), THREADS ("1 <cores>"),
# TORCH_DECODERS ("pil io"),
# PYTHON (python3 with torch + torchvision for the comparison; without them
# only Cortado is timed, and the script says so), KEEP (a folder to keep the
# images and the LMDB in, reused when present).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
TRAINER=$BUILD_DIR/tools/trainer
CONVERT=$BUILD_DIR/tools/convert_imageset
IMAGES=${IMAGES:-1000}
BATCH=${BATCH:-128}
ITERS=${ITERS:-6}
REPEATS=${REPEATS:-5}
BATCHES=${BATCHES:-12}
WARM=${WARM:-3}
TYPE=${TYPE:-FLOAT16}
TORCH_DECODERS=${TORCH_DECODERS:-"pil io"}
CORES=$(nproc)
THREADS=${THREADS:-"1 $CORES"}
[ "$CORES" -eq 1 ] && THREADS=${THREADS% 1}
PYTHON=${PYTHON:-python3}
[ -x "$TRAINER" ] || { echo "imagenet_data: $TRAINER not found; build first" >&2; exit 1; }
[ -x "$CONVERT" ] || { echo "imagenet_data: $CONVERT not found (it needs an OpenCV build)" >&2; exit 1; }
if [ -n "${KEEP:-}" ]; then
  tmp=$KEEP
  mkdir -p "$tmp"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi
pin_one=""
command -v taskset >/dev/null && pin_one="taskset -c 0"

# The images: numpy and PIL (Debian's python3-numpy, python3-pil), from PYTHON
# when it has them, else the system's python3.
GEN=$PYTHON
"$GEN" -c 'import numpy, PIL' 2>/dev/null || GEN=/usr/bin/python3
if [ ! -f "$tmp/images/list.txt" ]; then
  "$GEN" scripts/bench/imagenet_jpegs.py "$tmp/images" "$IMAGES"
fi
"$GEN" - "$tmp/images" <<'PY'
import os, sys
from PIL import Image
d = sys.argv[1]
names = [l.split()[0] for l in open(os.path.join(d, "list.txt"))]
sizes = [os.path.getsize(os.path.join(d, n)) for n in names]
dims = [Image.open(os.path.join(d, n)).size for n in names]
w = sorted(x for x, _ in dims)
h = sorted(y for _, y in dims)
print("imagenet_data: %d JPEGs (quality 90, 4:2:0): %.1f KB on average (%.0f to %.0f KB), %.0fx%.0f pixels on "
      "average (width %d to %d, height %d to %d)" % (len(names), sum(sizes) / len(sizes) / 1000,
      min(sizes) / 1000, max(sizes) / 1000, sum(w) / len(w), sum(h) / len(h), w[0], w[-1], h[0], h[-1]))
PY
if [ ! -d "$tmp/lmdb" ]; then
  "$CONVERT" --encoded --shuffle "$tmp/images/" "$tmp/images/list.txt" "$tmp/lmdb" > "$tmp/convert.log" 2>&1 ||
    { tail -5 "$tmp/convert.log" >&2; exit 1; }
fi

for th in $THREADS; do
  cat > "$tmp/net_$th.prototxt" <<NET
name: "imagenet_data"
default_forward_type: $TYPE
default_backward_type: $TYPE
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { crop_size: 224 rand_crop_area_lower: 0.08 mirror: true scale: 0.0174
                    mean_value: 104 mean_value: 117 mean_value: 123 }
  data_param { source: "$tmp/lmdb" batch_size: $BATCH threads: $th } }
layer { name: "silence" type: "Silence" bottom: "data" bottom: "label" }
NET
done

cat > "$tmp/torch_loader.py" <<'PY'
# PyTorch's DataLoader on the same JPEGs and the ResNet training transforms;
# prints images/s. Decoder "pil": torchvision's default ImageFolder loading
# (PIL.Image.open + convert("RGB")); "io": torchvision.io.decode_jpeg on the
# file's bytes, the transforms on uint8 tensors.
import os, sys, time
import torch
import torchvision
from torchvision import transforms
root, batch, workers, batches, warm, decoder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    int(sys.argv[5]), sys.argv[6]
normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
if decoder == "pil":
    load = torchvision.datasets.folder.default_loader
    t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                            normalize])
else:
    from torchvision.io import decode_jpeg, read_file
    load = lambda path: decode_jpeg(read_file(path))
    t = transforms.Compose([transforms.RandomResizedCrop(224, antialias=True), transforms.RandomHorizontalFlip(),
                            transforms.ConvertImageDtype(torch.float), normalize])

class Files(torch.utils.data.Dataset):
    def __init__(self, root):
        self.items = [(os.path.join(root, l.split()[0]), int(l.split()[1])) for l in open(os.path.join(root, "list.txt"))]
    def __len__(self):
        return len(self.items)
    def __getitem__(self, i):
        path, label = self.items[i]
        return t(load(path)), label

data = Files(root)
# One long shuffled pass (drawn with replacement), so that no epoch boundary
# restarts the workers' prefetch inside the timed batches.
sampler = torch.utils.data.RandomSampler(data, replacement=True, num_samples=(warm + batches) * batch)
loader = torch.utils.data.DataLoader(data, batch_size=batch, sampler=sampler, num_workers=workers, drop_last=True)
start = None
for done, (x, y) in enumerate(loader, 1):
    if done == warm:
        start = time.perf_counter()
print("images_per_s=%.1f" % (batches * batch / (time.perf_counter() - start)))
PY
torch_ok=0
if "$PYTHON" -c 'import torch, torchvision' 2>/dev/null; then
  torch_ok=1
  echo "imagenet_data: PyTorch $("$PYTHON" -c 'import torch, torchvision, PIL; print(torch.__version__, "torchvision", torchvision.__version__, "PIL", PIL.__version__)')"
else
  echo "imagenet_data: $PYTHON has no torch/torchvision: timing Cortado only (PYTHON=<a python with torch> to compare)"
fi

echo "imagenet_data: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A runs
for r in $(seq 1 "$REPEATS"); do
  for th in $THREADS; do
    pin=""
    [ "$th" = 1 ] && pin=$pin_one
    walls=()
    for it in "$ITERS" $((2 * ITERS)); do
      t0=$(date +%s.%N)
      $pin "$TRAINER" time --model="$tmp/net_$th.prototxt" --iterations="$it" --warmup=2 >"$tmp/time.log" 2>&1 ||
        { tail -5 "$tmp/time.log" >&2; exit 1; }
      walls+=("$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')")
    done
    runs[cortado_$th]+="$(awk -v a="${walls[0]}" -v b="${walls[1]}" -v n="$((2 * ITERS * BATCH))" \
      'BEGIN { printf "%.1f", n / (b - a) }') "
    if [ $torch_ok = 1 ]; then
      for dec in $TORCH_DECODERS; do
        out=$($pin "$PYTHON" "$tmp/torch_loader.py" "$tmp/images" "$BATCH" "$th" "$BATCHES" "$WARM" "$dec" \
              2>"$tmp/torch.log") || { tail -5 "$tmp/torch.log" >&2; exit 1; }
        runs[torch_${dec}_$th]+="$(kv images_per_s "$out") "
      done
    fi
  done
done
echo "imagenet_data: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

header=$(printf '%-8s %10s %13s' threads cortado cortado/core)
[ $torch_ok = 1 ] && for dec in $TORCH_DECODERS; do header+=$(printf ' %13s %17s' "torch_$dec" "torch_$dec/core"); done
[ $torch_ok = 1 ] && header+=$(printf ' %17s' "cortado/fastest")
echo "$header"
for th in $THREADS; do
  c=$(echo "${runs[cortado_$th]}" | tr ' ' '\n' | grep . | median %.1f)
  line=$(printf '%-8s %10s %13s' "$th" "$c" "$(awk -v i="$c" -v t="$th" 'BEGIN { printf "%.1f", i / t }')")
  best=0
  detail="cortado_runs=\"${runs[cortado_$th]% }\""
  if [ $torch_ok = 1 ]; then
    for dec in $TORCH_DECODERS; do
      p=$(echo "${runs[torch_${dec}_$th]}" | tr ' ' '\n' | grep . | median %.1f)
      line+=$(printf ' %13s %17s' "$p" "$(awk -v i="$p" -v t="$th" 'BEGIN { printf "%.1f", i / t }')")
      best=$(awk -v a="$best" -v b="$p" 'BEGIN { print (b > a ? b : a) }')
      detail+=" torch_${dec}_runs=\"${runs[torch_${dec}_$th]% }\""
    done
    line+=$(printf ' %17s' "$(ratio "$c" "$best")")
  fi
  echo "$line"
  echo "imagenet_data: threads=$th $detail"
done
echo "imagenet_data: images/s, medians of $REPEATS alternating runs; batch=$BATCH type=$TYPE images=$IMAGES" \
     "cortado_iterations=$ITERS pytorch_batches=$BATCHES pytorch_decoders=\"$TORCH_DECODERS\" cores=$CORES"
