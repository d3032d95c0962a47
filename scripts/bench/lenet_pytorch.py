#!/usr/bin/env python3
"""LeNet on Fashion-MNIST in PyTorch, the peer run of lenet_cpu.sh.

The net, initialization and recipe of models/lenet (Caffe's LeNet): conv 20
5x5, max pool 2, conv 50 5x5, max pool 2, inner product 500, ReLU, inner
product 10, softmax loss; Caffe's xavier (uniform, +-sqrt(3 / fan_in)) for
the weights and zero biases; pixels scaled by 1/256; SGD with momentum 0.9,
weight decay 5e-4, the biases at twice the rate, and Caffe's "inv" rate
(0.01 * (1 + 1e-4 * it)^-0.75); batch 64 in the files' order, as the LMDB
that convert_mnist writes.

--mode time: ms per training iteration (forward, loss, backward, optimizer
step, zero_grad) on one batch held in memory, the median of --iters timed
iterations after --warmup; prints one key=value line:
  pytorch: precision=fp32 threads=2 ms_median=... images_per_s=...
--mode train: --max-iter iterations, then the accuracy on the 10,000 test
images:
  pytorch: precision=fp32 iterations=2000 accuracy=0.8812 seconds=...
--precision bf16 runs torch.autocast("cpu", bfloat16) (PyTorch's CPU mixed
precision; no loss scaling). The data are Debian's dataset-fashion-mnist
files (the IDX files convert_mnist reads).
"""
import argparse
import gzip
import os
import statistics
import sys
import time

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return raw[4 + 4 * dims:], shape


def load(torch, prefix):
    images, shape = read_idx(os.path.join(DATA, prefix + "-images-idx3-ubyte.gz"))
    labels, _ = read_idx(os.path.join(DATA, prefix + "-labels-idx1-ubyte.gz"))
    x = torch.frombuffer(bytearray(images), dtype=torch.uint8).reshape(shape[0], 1, shape[1], shape[2])
    y = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()
    return x.float() * 0.00390625, y


def lenet(torch):
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2),
                        nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    for m in net:
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            fan_in = m.weight[0].numel()
            a = (3.0 / fan_in) ** 0.5
            nn.init.uniform_(m.weight, -a, a)
            nn.init.zeros_(m.bias)
    return net


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["time", "train"], default="time")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--max-iter", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()

    import torch

    if not os.path.isdir(DATA):
        print("lenet_pytorch: %s is missing (Debian: dataset-fashion-mnist)" % DATA, file=sys.stderr)
        return 1
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    net = lenet(torch)
    weights = [m.weight for m in net if hasattr(m, "weight")]
    biases = [m.bias for m in net if hasattr(m, "bias")]
    base_lr = 0.01
    opt = torch.optim.SGD([{"params": weights, "lr": base_lr}, {"params": biases, "lr": 2 * base_lr}],
                          lr=base_lr, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x_train, y_train = load(torch, "train")

    def step(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    if args.mode == "time":
        x, y = x_train[:args.batch].contiguous(), y_train[:args.batch].contiguous()
        times = []
        for i in range(args.warmup + args.iters):
            t0 = time.perf_counter()
            step(x, y)
            if i >= args.warmup:
                times.append((time.perf_counter() - t0) * 1000)
        ms = statistics.median(times)
        print("pytorch: precision=%s threads=%d batch=%d ms_median=%.4f images_per_s=%.1f"
              % (args.precision, args.threads, args.batch, ms, args.batch * 1000 / ms))
        return 0

    n = x_train.shape[0]
    t0 = time.perf_counter()
    for it in range(args.max_iter):
        lr = base_lr * (1 + 1e-4 * it) ** -0.75
        opt.param_groups[0]["lr"], opt.param_groups[1]["lr"] = lr, 2 * lr
        start = (it * args.batch) % n
        idx = torch.arange(start, start + args.batch) % n  # wraps around, as the LMDB cursor does
        step(x_train[idx], y_train[idx])
    seconds = time.perf_counter() - t0
    x_test, y_test = load(torch, "t10k")
    correct = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
        for k in range(0, x_test.shape[0], 100):
            correct += (net(x_test[k:k + 100]).argmax(1) == y_test[k:k + 100]).sum().item()
    print("pytorch: precision=%s iterations=%d accuracy=%.4f seconds=%.1f"
          % (args.precision, args.max_iter, correct / x_test.shape[0], seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
