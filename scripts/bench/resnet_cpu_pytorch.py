#!/usr/bin/env python3
"""ResNet training speed on the CPU in PyTorch, the peer run of resnet_cpu.sh.

torchvision's resnet18 or resnet50 (the nets of models/resnet18 and
models/resnet50: the same layers and learnable parameter counts), one fixed
synthetic batch of 224x224 images held in memory (like Cortado's DummyData
nets), cross-entropy loss, SGD with momentum 0.9 and weight decay 1e-4.
--precision bf16 runs torch.autocast("cpu", bfloat16), PyTorch's CPU mixed
precision (no loss scaling); fp32 runs without autocast. --channels-last
puts the model and batch in channels_last memory format (off by default:
Cortado's CPU layers are NCHW).

One iteration is forward, loss, backward, optimizer step and zero_grad; the
median of --iters timed iterations after --warmup untimed ones is printed as
one key=value line:
  pytorch: arch=resnet18 precision=fp32 batch=16 threads=2 ms_median=... images_per_s=...
"""
import argparse
import statistics
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=["resnet18", "resnet50"], default="resnet18")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    ap.add_argument("--channels-last", action="store_true")
    args = ap.parse_args()
    if args.batch < 1 or args.iters < 1 or args.warmup < 0:
        ap.error("--batch and --iters must be positive, --warmup zero or positive")

    import torch
    import torchvision

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    model = getattr(torchvision.models, args.arch)(num_classes=1000)
    x = torch.randn(args.batch, 3, 224, 224)
    y = torch.randint(0, 1000, (args.batch,))
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.iters):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1000.0)
    ms = statistics.median(times)
    print(f"pytorch: arch={args.arch} precision={args.precision} batch={args.batch} "
          f"threads={torch.get_num_threads()} ms_median={ms:.3f} images_per_s={args.batch * 1000.0 / ms:.2f}")


if __name__ == "__main__":
    main()
