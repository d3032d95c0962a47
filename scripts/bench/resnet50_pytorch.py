#!/usr/bin/env python3
"""ResNet-50 training throughput in PyTorch, the peer run of resnet50_gpu.sh.

The configuration PyTorch users run for mixed precision: torchvision's
resnet50, channels_last memory format, torch.backends.cudnn.benchmark = True,
torch.autocast(float16) with a GradScaler (dynamic loss scaling), SGD with
momentum 0.9 and weight decay 1e-4, one fixed synthetic batch resident on the
GPU (no data loading, like Cortado's DummyData net). --precision bf16 runs
torch.autocast(bfloat16) without a GradScaler (bfloat16 needs no loss
scaling); --precision fp32 runs the same without autocast and GradScaler (TF32 left at PyTorch's default for
convolutions, which is on; matmul TF32 off, also the default).

One iteration is forward, loss, backward, optimizer step and zero_grad. Each
of --iters timed iterations is timed with CUDA events after --warmup untimed
ones; prints the median, images/s = batch / median, and the peak memory the
caching allocator reserved over the whole run, warm-up and cuDNN's algorithm
search included (what the process holds, as Cortado's allocator peak), and
allocated, as one key=value line:
  pytorch: precision=amp batch=256 ms_median=... images_per_s=... peak_reserved_mib=... peak_allocated_mib=...
Exit status 3: out of memory at this batch (the caller may retry smaller).
Without torchvision, the same network built here (builtin_resnet50; the
key=value line says model=builtin).
"""
import argparse
import statistics
import sys


def builtin_resnet50(num_classes):
    """torchvision.models.resnet50's layers (ResNet v1.5: the stride on the 3x3
    of a bottleneck), for a machine without torchvision."""
    import torch.nn as nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precision", choices=["amp", "bf16", "fp32"], default="amp")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()

    import torch

    dev = torch.device(args.device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        print("resnet50_pytorch: needs a CUDA device (got %s, cuda available: %s)"
              % (args.device, torch.cuda.is_available()), file=sys.stderr)
        return 1
    torch.cuda.set_device(dev)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    amp = args.precision == "amp"
    autocast_dtype = torch.bfloat16 if args.precision == "bf16" else torch.float16
    autocast_on = args.precision != "fp32"

    try:
        import torchvision
        model, model_name = torchvision.models.resnet50(num_classes=1000), "torchvision"
    except ImportError:
        model, model_name = builtin_resnet50(1000), "builtin"
    model = model.to(dev, memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=dev)

    def step():
        with torch.autocast("cuda", dtype=autocast_dtype, enabled=autocast_on):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    try:
        for _ in range(max(1, args.warmup)):
            step()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.iters):
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
    print("pytorch: precision=%s batch=%d iterations=%d warmup=%d ms_median=%.3f images_per_s=%.1f "
          "peak_reserved_mib=%.1f peak_allocated_mib=%.1f torch=%s cudnn=%s model=%s gpu=%s" % (
              args.precision, args.batch, args.iters, args.warmup, ms, args.batch * 1000.0 / ms,
              torch.cuda.max_memory_reserved(dev) / mib, torch.cuda.max_memory_allocated(dev) / mib,
              torch.__version__, torch.backends.cudnn.version(), model_name,
              torch.cuda.get_device_name(dev).replace(" ", "_")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
