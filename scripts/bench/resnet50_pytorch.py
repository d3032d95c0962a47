#!/usr/bin/env python3
"""ResNet-50 training throughput in PyTorch, the peer run of resnet50_gpu.sh.

The configuration PyTorch users run for mixed precision: torchvision's
resnet50, channels_last memory format, torch.backends.cudnn.benchmark = True,
torch.autocast(float16) with a GradScaler (dynamic loss scaling), SGD with
momentum 0.9 and weight decay 1e-4, one fixed batch of random values
(Gaussian images, uniform labels) resident on the GPU (no data loading, as
Cortado's synthetic stage: DummyData with random fillers, drawn once by
`trainer time`). --precision bf16 runs torch.autocast(bfloat16) without a
GradScaler (bfloat16 needs no loss scaling); --precision fp32 runs the same
without autocast and GradScaler, and without TF32 in convolutions and
matmuls (PyTorch turns it on for convolutions by default; Cortado's FP32
convolutions and GEMMs are FMA-only), unless --tf32.

The same net as Cortado's models/resnet50 (--arch v1, the default): ResNet
v1, as Caffe's ResNet-50 files, with the stride of a stage's first block on
its first 1x1 convolution (branch2a). torchvision's resnet50 is v1.5 (the
stride on the 3x3, whose four strided 3x3 convolutions then run at the
larger size: more work at the same parameters); --arch v1.5 times it
unchanged. The v1 net is torchvision's model with the two strides
swapped, the same parameters and names.

One iteration is forward, loss, backward, optimizer step and zero_grad. Each
of --iters timed iterations is timed with CUDA events after --warmup untimed
ones; prints the median, images/s = batch / median, and the peak memory the
caching allocator reserved over the whole run, warm-up and cuDNN's algorithm
search included (what the process holds, as Cortado's allocator peak), and
allocated, as one key=value line:
  pytorch: precision=amp batch=256 ms_median=... images_per_s=... peak_reserved_mib=... peak_allocated_mib=... arch=v1 tf32=0
--device cpu runs on the CPU (a smoke test of the caller; autocast and the
GradScaler on the CPU, timed with the host clock, no memory figures).
Exit status 3: out of memory at this batch (the caller may retry smaller).
Without torchvision, the same network built here (builtin_resnet50; the
key=value line says model=builtin).
"""
import argparse
import statistics
import sys


def builtin_resnet50(num_classes, v1):
    """torchvision.models.resnet50's layers (ResNet v1.5: the stride on the 3x3
    of a bottleneck; v1: on the first 1x1), for a machine without
    torchvision."""
    import torch.nn as nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            s1, s3 = (stride, 1) if v1 else (1, stride)
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, s1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, s3, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            return self.relu(self.bn3(self.conv3(out)) + identity)

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, num_classes)]
    return nn.Sequential(*layers)


def to_v1(model):
    """torchvision's resnet50 (v1.5) as ResNet v1: in each stage's first
    block the stride moves from the 3x3 (conv2) to the first 1x1 (conv1)."""
    for stage in (model.layer2, model.layer3, model.layer4):
        block = stage[0]
        block.conv1.stride, block.conv2.stride = block.conv2.stride, (1, 1)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precision", choices=["amp", "bf16", "fp32"], default="amp")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--arch", choices=["v1", "v1.5"], default="v1",
                    help="v1: Cortado's and Caffe's ResNet-50 (the default); v1.5: torchvision's")
    ap.add_argument("--tf32", action="store_true", help="fp32: TF32 in convolutions and matmuls")
    args = ap.parse_args()

    import time
    import torch

    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("resnet50_pytorch: no CUDA device (got %s)" % args.device, file=sys.stderr)
        return 1
    if cuda:
        torch.cuda.set_device(dev)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.manual_seed(1)
    amp = args.precision == "amp"
    autocast_dtype = torch.bfloat16 if args.precision == "bf16" else torch.float16
    autocast_on = args.precision != "fp32"

    v1 = args.arch == "v1"
    try:
        import torchvision
        model, model_name = torchvision.models.resnet50(num_classes=1000), "torchvision"
        if v1:
            model = to_v1(model)
    except ImportError:
        model, model_name = builtin_resnet50(1000, v1), "builtin"
    model = model.to(dev, memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler(dev.type, enabled=amp)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=dev)

    def step():
        with torch.autocast(dev.type, dtype=autocast_dtype, enabled=autocast_on):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    try:
        for _ in range(max(1, args.warmup)):
            step()
        if cuda:
            torch.cuda.synchronize()
        times = []
        for _ in range(args.iters):
            if not cuda:
                t0 = time.perf_counter()
                step()
                times.append(1000.0 * (time.perf_counter() - t0))
                continue
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    except torch.cuda.OutOfMemoryError:
        print("resnet50_pytorch: out of memory at batch %d" % args.batch, file=sys.stderr)
        return 3
    ms = statistics.median(times)
    mib = 1024.0 * 1024.0
    reserved = torch.cuda.max_memory_reserved(dev) / mib if cuda else 0.0
    allocated = torch.cuda.max_memory_allocated(dev) / mib if cuda else 0.0
    name = torch.cuda.get_device_name(dev).replace(" ", "_") if cuda else "cpu"
    print("pytorch: precision=%s batch=%d iterations=%d warmup=%d ms_median=%.3f images_per_s=%.1f "
          "peak_reserved_mib=%.1f peak_allocated_mib=%.1f torch=%s cudnn=%s model=%s gpu=%s arch=%s tf32=%d" % (
              args.precision, args.batch, args.iters, args.warmup, ms, args.batch * 1000.0 / ms,
              reserved, allocated, torch.__version__, torch.backends.cudnn.version(), model_name, name,
              args.arch, int(args.tf32 and args.precision == "fp32")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
