#!/usr/bin/env python3
"""Predicts the step time and the scaling efficiency of data-parallel training
from measured parts: a net's per-layer times from `trainer time`, Cortado's own
plan of the gradient sums, and a model of the links.

    python3 scripts/bench/scaling_model.py TIME_LOG [TIME_LOG ...] [--ranks 1,8,64,256] [link options]
    python3 scripts/bench/scaling_model.py resnet50.log --step-ms 74.7 --type-ms Convolution=16.2/26.8,...
    python3 scripts/bench/scaling_model.py rank0.log rank1.log --link-fit mpi_link.txt --ranks 2

TIME_LOG is what `trainer time --solver=S` writes (stdout and stderr
together): Caffe's per-layer lines ("conv1  forward: 0.12 ms."), the table
of layers by cost (for the layer types), the `time:` line (forward,
backward, update, training loop) and the plan of the gradient sums
(`bucket:` and `param:` lines, printed since `--reduce_buckets`). Several
logs (runs at the same time, sharing the cores as ranks would) are averaged.

What is measured and what is predicted. The compute of one rank (forward,
each layer's backward, the update) is taken as measured, the same on every
rank (weak scaling: each rank keeps its batch). The model predicts the
communication, and how much of it backward hides:

- Ring all-reduce of B bytes over p ranks, g per node, n = p/g nodes, in
  the shape of NCCL's own cost model (src/graph/tuning.cc, ring, Simple
  protocol):

      T = base + 2(p-1)/p * B / bw + (2(p-1) - s) * lat_intra + s * lat_inter

  with s = 2n steps across nodes when n > 1 (else 0), bw = bw_intra (the
  per-GPU NVLink bandwidth, one direction) within one node, and
  bw = min(bw_intra, g * bw_nic) across nodes (a ring crosses each node
  boundary once per channel, and the node's g NICs carry the channels side
  by side). With base = 0 and one link it is the textbook
  2(p-1)/p * B / bw + 2(p-1) * lat.
- Without overlap (reduce_buckets 1, and every synchronous engine: MPI and
  the threads engine sum on the host once after backward): one sum per
  gradient type after backward, one after the other; the step is
  forward + backward + the sums + the update.
- With overlap (NCCL and reduce_buckets > 1): each bucket of the plan
  starts when backward has completed it (its ready layer's backward has
  ended) and the previous sum has finished (one stream: the sums run one
  at a time, in the plan's order); the update waits for the last. The
  backward's per-layer medians (measured synchronized after each layer) are
  scaled to sum to the measured backward pass. Not modelled: the slowdown
  of backward's kernels while NCCL's run beside them on the same GPU.
- Host engines also copy the gradients into one buffer and back
  (--copy-gbs), and every step agrees on the signals' action with one tiny
  collective (--step-collectives).
- The bucket count that is best: for each ranks count, the plans for
  1..128 buckets, re-planned here from the `param:` lines with the rule of
  PlanGradientBuckets (include/cortado/comm/gradient_reducer.hpp). The
  script checks its re-plan against the trainer's own `bucket:` lines for
  the log's count and stops if they differ.

The link presets are published peak numbers (LINKS below); measured NCCL
bandwidths are lower, so these predictions are optimistic about the
bandwidth term (and, keeping the ring where NCCL would take its tree,
pessimistic about the latency at 64 and more ranks).

Standard library only.
"""
import argparse
import math
import re
import statistics
import sys
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple

# Storage types in the order of kAllTypes (types.hpp), with their bytes.
TYPES = ["DOUBLE", "FLOAT", "FLOAT16", "BFLOAT16"]
TYPE_BYTES = {"DOUBLE": 8, "FLOAT": 4, "FLOAT16": 2, "BFLOAT16": 2}


@dataclass
class Link:
    """A link model: bandwidths in GB/s (10^9 bytes/s, one direction),
    latencies in microseconds."""
    name: str
    bw_intra: float           # per rank, within a node (NVLink)
    lat_intra: float          # per ring step within a node
    bw_nic: float = 0.0       # per NIC, between nodes (InfiniBand)
    lat_inter: float = 0.0    # per ring step that crosses nodes
    base: float = 0.0         # per all-reduce call
    per_node: int = 8         # ranks (and NICs) per node
    copy_gbs: float = 0.0     # host engines: pack and unpack rate (0: no copies)
    step_collectives: int = 0  # tiny collectives per step (host engines: the action's agreement)
    tiny_ms: Optional[float] = None  # a tiny collective's measured time (None: the formula's, 8 bytes)
    source: str = ""


# Published numbers. NVLink 4 on H100 SXM5: 18 links, 900 GB/s per GPU both
# directions together (NVIDIA H100 datasheet and Hopper architecture
# whitepaper), so 450 GB/s each way. NDR InfiniBand: 400 Gb/s per port = 50
# GB/s each way, one ConnectX-7 per GPU in a DGX H100 (8 per node; DGX H100
# datasheet). Latencies: NCCL's cost model for ring all-reduce with the
# Simple protocol (the one it takes for buckets of megabytes;
# src/graph/tuning.cc in NCCL 2.18/2.19: baseLat 8.4 us, hwLat NVLink 3.4 us,
# NET 14 us per step).
LINKS = {
    "h100-ndr": Link("H100 SXM, NVLink 4 within a node of 8, NDR InfiniBand 400 Gb/s per GPU between nodes",
                     bw_intra=450.0, lat_intra=3.4, bw_nic=50.0, lat_inter=14.0, base=8.4, per_node=8,
                     source="NVLink 4: 900 GB/s per GPU both ways (H100 datasheet); NDR: 400 Gb/s per NIC, "
                            "8 per node (DGX H100); latencies: NCCL's ring/Simple cost model (tuning.cc)"),
}


@dataclass
class Param:
    index: int
    type: str
    values: int
    ready_layer: int


@dataclass
class Bucket:
    type: str
    values: int
    params: int
    ready_layer: int  # -1: after backward

    @property
    def bytes(self) -> int:
        return self.values * TYPE_BYTES[self.type]


@dataclass
class Profile:
    """One rank's measured compute, in ms, and the net's gradient sums."""
    layers: List[str] = field(default_factory=list)       # net order
    layer_types: Dict[str, str] = field(default_factory=dict)
    layer_forward: List[float] = field(default_factory=list)
    layer_backward: List[float] = field(default_factory=list)
    forward: float = 0.0
    backward: float = 0.0
    update: float = 0.0
    loop: float = 0.0      # the training loop's ms per iteration (0: not in the log)
    batch: int = 0
    device: str = ""
    reduce_buckets: Optional[int] = None
    buckets: List[Bucket] = field(default_factory=list)
    params: List[Param] = field(default_factory=list)  # in the order backward completes them

    @property
    def compute(self) -> float:
        """The step of one rank alone: the training loop where measured, else the parts."""
        return self.loop if self.loop > 0 else self.forward + self.backward + self.update


class ModelError(Exception):
    pass


# ---- reading `trainer time` ----------------------------------------------

LAYER_LINE = re.compile(r"\]\s*(\S+)\s+(forward|backward): ([-+0-9.eE]+) ms\.\s*$")
TABLE_ROW = re.compile(r"^\s*\d+\s+(\S+)\s+(\S+)\s+[-+0-9.eE]+\s+[-+0-9.eE]+\s+[-+0-9.eE]+\s+[0-9.]+%\s*$")
REDUCE_LINE = re.compile(r"^Gradient sums across ranks, reduce_buckets (-?\d+):")


def key_values(line: str) -> Dict[str, str]:
    out = {}
    for word in line.split()[1:]:
        if "=" in word:
            k, v = word.split("=", 1)
            out[k] = v
    return out


def parse_time_log(text: str, name: str = "log") -> Profile:
    """The parts of a `trainer time` log the model reads."""
    p = Profile()
    seen = {}
    for line in text.splitlines():
        m = LAYER_LINE.search(line)
        if m:
            layer, kind, ms = m.group(1), m.group(2), float(m.group(3))
            if layer not in seen:
                seen[layer] = len(p.layers)
                p.layers.append(layer)
                p.layer_forward.append(0.0)
                p.layer_backward.append(0.0)
            (p.layer_forward if kind == "forward" else p.layer_backward)[seen[layer]] = ms
            continue
        m = TABLE_ROW.match(line)
        if m:
            p.layer_types[m.group(1)] = m.group(2)
            continue
        m = REDUCE_LINE.match(line)
        if m:
            p.reduce_buckets = int(m.group(1))
            continue
        if line.startswith("bucket: "):
            kv = key_values(line)
            p.buckets.append(Bucket(kv["type"], int(kv["values"]), int(kv["params"]), int(kv["ready_layer"])))
        elif line.startswith("param: "):
            kv = key_values(line)
            p.params.append(Param(int(kv["index"]), kv["type"], int(kv["values"]), int(kv["ready_layer"])))
        elif line.startswith("time: "):
            kv = key_values(line)
            p.forward = float(kv["forward_ms_median"])
            p.backward = float(kv["backward_ms_median"])
            p.update = float(kv["update_ms_median"])
            p.loop = float(kv.get("loop_ms_mean", 0) or 0)
            p.batch = int(kv.get("batch", 0))
            p.device = kv.get("device", "")
    if not p.layers:
        raise ModelError(f"{name}: no per-layer lines ('<layer>  forward: X ms.'): not a `trainer time` log")
    if p.forward + p.backward <= 0:
        raise ModelError(f"{name}: no 'time:' line with forward_ms_median and backward_ms_median")
    if not p.params:
        raise ModelError(f"{name}: no 'param:' lines: the plan of the gradient sums is missing (a trainer "
                         f"that predates `trainer time --reduce_buckets`, or a TEST-phase net)")
    return p


def average_profiles(profiles: List[Profile]) -> Profile:
    """The mean of runs of the same net (ranks sharing the cores, each timed as
    its own process)."""
    first = profiles[0]
    for q in profiles[1:]:
        if q.layers != first.layers or [(x.index, x.values) for x in q.params] != \
                [(x.index, x.values) for x in first.params]:
            raise ModelError("the logs are not of the same net")
    mean = statistics.fmean
    return replace(
        first,
        layer_forward=[mean(v) for v in zip(*(q.layer_forward for q in profiles))],
        layer_backward=[mean(v) for v in zip(*(q.layer_backward for q in profiles))],
        forward=mean(q.forward for q in profiles),
        backward=mean(q.backward for q in profiles),
        update=mean(q.update for q in profiles),
        loop=mean(q.loop for q in profiles) if all(q.loop > 0 for q in profiles) else 0.0)


def scale_profile(p: Profile, step_ms: float, type_ms: Optional[Dict[str, Tuple[float, float]]] = None) -> Profile:
    """The profile moved to another device whose measured step is `step_ms`:
    with `type_ms` (layer type -> (forward, backward) ms summed over the
    layers of that type, measured there), each listed type's layers take
    those totals in their own proportions, and the other layers keep their
    share relative to the listed ones; then every part, the update
    included, is scaled by one factor so that the step is `step_ms`."""
    fwd, bwd = list(p.layer_forward), list(p.layer_backward)
    if type_ms:
        listed = {i for i, n in enumerate(p.layers) if p.layer_types.get(n) in type_ms}
        if not p.layer_types:
            raise ModelError("--type-ms needs the layer types: the log has no table of layers by cost")
        cpu_listed = sum(fwd[i] + bwd[i] for i in listed)
        gpu_listed = 0.0
        for t, (tf, tb) in type_ms.items():
            idx = [i for i in listed if p.layer_types[p.layers[i]] == t]
            sf, sb = sum(fwd[i] for i in idx), sum(bwd[i] for i in idx)
            # A type the profile spends no time in (fused away) adds nothing.
            if sf > 0:
                for i in idx:
                    fwd[i] *= tf / sf
                gpu_listed += tf
            if sb > 0:
                for i in idx:
                    bwd[i] *= tb / sb
                gpu_listed += tb
        if cpu_listed > 0:
            r = gpu_listed / cpu_listed
            for i in range(len(fwd)):
                if i not in listed:
                    fwd[i] *= r
                    bwd[i] *= r
    # The parts in the same proportions as the layers now; the update keeps
    # its share of the measured step.
    lf, lb = sum(fwd), sum(bwd)
    if lf + lb <= 0:
        raise ModelError("the per-layer times sum to 0")
    update_share = p.update / p.compute if p.compute > 0 else 0.0
    layers_ms = step_ms * (1 - update_share)
    k = layers_ms / (lf + lb)
    return replace(p, layer_forward=[x * k for x in fwd], layer_backward=[x * k for x in bwd],
                   forward=lf * k, backward=lb * k, update=step_ms - layers_ms, loop=step_ms)


# ---- the plan of the gradient sums -----------------------------------------

def plan_buckets(params: List[Param], reduce_buckets: int) -> List[Bucket]:
    """PlanGradientBuckets (gradient_reducer.hpp) from the `param:` lines,
    which list the trained parameters in the order backward completes them."""
    if reduce_buckets <= 1:
        out = []
        for t in TYPES:
            ps = [q for q in params if q.type == t]
            if ps:
                out.append(Bucket(t, sum(q.values for q in ps), len(ps), -1))
        return out
    size = {}
    for t in TYPES:
        total = sum(q.values for q in params if q.type == t)
        size[t] = (total + reduce_buckets - 1) // reduce_buckets
    out = []
    open_ = {t: [0, 0] for t in TYPES}  # values, params
    for q in params:
        b = open_[q.type]
        b[0] += q.values
        b[1] += 1
        if b[0] >= size[q.type]:
            out.append(Bucket(q.type, b[0], b[1], q.ready_layer))
            open_[q.type] = [0, 0]
    for t in TYPES:
        if open_[t][1]:
            out.append(Bucket(t, open_[t][0], open_[t][1], -1))
    return out


def check_plan(p: Profile) -> None:
    """The re-plan must give the trainer's own plan for the log's count."""
    if p.reduce_buckets is None or not p.buckets:
        return
    mine = plan_buckets(p.params, p.reduce_buckets)
    if mine != p.buckets:
        raise ModelError(f"the re-plan of reduce_buckets {p.reduce_buckets} differs from the trainer's 'bucket:' "
                         f"lines ({len(mine)} against {len(p.buckets)} buckets): plan_buckets no longer follows "
                         f"PlanGradientBuckets")


# ---- the link and the step ------------------------------------------------------

def allreduce_ms(nbytes: float, ranks: int, link: Link) -> float:
    """Ring all-reduce (the module's docstring), in ms."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    g = min(ranks, link.per_node)
    nodes = math.ceil(ranks / g)
    steps = 2 * (ranks - 1)
    inter = 2 * nodes if nodes > 1 else 0
    bw = link.bw_intra if nodes == 1 else min(link.bw_intra, g * link.bw_nic)
    us = link.base + (steps - inter) * link.lat_intra + inter * link.lat_inter
    return us / 1000.0 + 2.0 * (ranks - 1) / ranks * nbytes / (bw * 1e9) * 1000.0


def sum_ms(b: Bucket, ranks: int, link: Link) -> float:
    """One bucket's sum: the all-reduce, and a host engine's two copies."""
    copies = 2.0 * b.bytes / (link.copy_gbs * 1e9) * 1000.0 if link.copy_gbs > 0 and ranks > 1 else 0.0
    return allreduce_ms(b.bytes, ranks, link) + copies


@dataclass
class Step:
    ms: float
    exposed: float                        # ms of communication backward did not hide
    sums: List[Tuple[Bucket, float, float, float]] = field(default_factory=list)  # bucket, ready, start, end


def backward_start(p: Profile) -> float:
    """When backward starts in a step: after the training loop's own work
    (data, clearing the gradients: the loop's time beyond the parts, where
    it is more) and forward."""
    return max(p.compute - (p.forward + p.backward + p.update), 0.0) + p.forward


def simulate(p: Profile, buckets: List[Bucket], ranks: int, link: Link, overlap: bool) -> Step:
    """One step on `ranks` ranks: backward's timeline from the measured
    layers, the sums of `buckets` on one link in the plan's order."""
    compute = p.compute
    other = compute - (p.forward + p.backward + p.update)
    f0 = backward_start(p)
    b_total = p.backward
    lb = sum(p.layer_backward)
    k = b_total / lb if lb > 0 else 0.0
    done = {}  # layer -> ms into backward at which its backward has ended
    t = 0.0
    for i in range(len(p.layer_backward) - 1, -1, -1):
        t += p.layer_backward[i] * k
        done[i] = t
    backward_end = f0 + b_total
    link_free = 0.0
    sums = []
    for b in buckets if ranks > 1 else []:
        ready = f0 + done.get(b.ready_layer, b_total) if overlap and b.ready_layer >= 0 else backward_end
        start = max(ready, link_free)
        end = start + sum_ms(b, ranks, link)
        link_free = end
        sums.append((b, ready, start, end))
    tiny_ms = link.tiny_ms if link.tiny_ms is not None else allreduce_ms(8, ranks, link)
    tiny = link.step_collectives * tiny_ms if ranks > 1 else 0.0
    end = max(backward_end, link_free) + tiny
    ms = end + p.update + min(other, 0.0)
    return Step(ms, ms - compute, sums)


BUCKET_SWEEP = list(range(1, 17)) + [20, 24, 32, 48, 64, 96, 128]


@dataclass
class Row:
    ranks: int
    nodes: int
    no_overlap: Step
    overlap: Step
    best_buckets: int
    best: Step


def predict(p: Profile, ranks_list: List[int], link: Link, reduce_buckets: int) -> List[Row]:
    rows = []
    plan = plan_buckets(p.params, reduce_buckets)
    whole = plan_buckets(p.params, 1)
    for r in ranks_list:
        nodes = math.ceil(r / min(r, link.per_node)) if r > 1 else 1
        no = simulate(p, whole, r, link, overlap=False)
        ov = simulate(p, plan, r, link, overlap=True)
        best_n, best = 1, simulate(p, whole, r, link, overlap=True)
        for n in BUCKET_SWEEP[1:]:
            s = simulate(p, plan_buckets(p.params, n), r, link, overlap=True)
            if s.ms < best.ms - 1e-9:
                best_n, best = n, s
        rows.append(Row(r, nodes, no, ov, best_n, best))
    return rows


# ---- a measured link ------------------------------------------------------------

LINK_SAMPLE = re.compile(r"^link: ranks=(\d+) bytes=(\d+) ms=([-+0-9.eE]+)")
COPY_SAMPLE = re.compile(r"^copy: bytes=(\d+) ms=([-+0-9.eE]+)")


def fit_link(text: str, name: str = "link", min_bytes: float = 0) -> Link:
    """A one-level link from an all-reduce benchmark (scaling_link.cpp's
    lines `link: ranks=R bytes=B ms=T`, `copy: bytes=B ms=T`): T = a + c*B
    fitted by least squares on relative errors over the sizes of at least
    `min_bytes` (a host's rate falls once the messages leave its caches:
    fit the sizes the sums have), then lat = a / (2(R-1)) and
    bw = 2(R-1)/R / c (the ring formula with base 0). A tiny collective
    costs what the smallest size measured took."""
    samples, copies, ranks = [], [], set()
    for line in text.splitlines():
        m = LINK_SAMPLE.match(line)
        if m:
            ranks.add(int(m.group(1)))
            samples.append((float(m.group(2)), float(m.group(3))))
        m = COPY_SAMPLE.match(line)
        if m:
            copies.append((float(m.group(1)), float(m.group(2))))
    if len(ranks) != 1 or not samples:
        raise ModelError(f"{name}: needs 'link: ranks=R bytes=B ms=T' lines, of one R")
    r = ranks.pop()
    tiny = min(samples)[1]
    fitted = [(x, y) for x, y in samples if x >= min_bytes]
    if len({x for x, _ in fitted}) < 2:
        raise ModelError(f"{name}: fewer than two sizes of at least {min_bytes:.0f} bytes to fit")
    # Weighted least squares, weights 1/T^2: each size counts by its relative error.
    sw = swx = swy = swxx = swxy = 0.0
    for x, y in fitted:
        w = 1.0 / (y * y)
        sw += w
        swx += w * x
        swy += w * y
        swxx += w * x * x
        swxy += w * x * y
    det = sw * swxx - swx * swx
    c = (sw * swxy - swx * swy) / det  # ms per byte
    a = (swy - c * swx) / sw           # ms
    if c <= 0:
        raise ModelError(f"{name}: the all-reduce time does not grow with the size; no bandwidth to fit")
    lat_us = max(a, 0.0) * 1000.0 / (2 * (r - 1))
    bw = 2.0 * (r - 1) / r / c / 1e6  # GB/s
    copy = 0.0
    if copies:
        big = max(b for b, _ in copies)  # the rate out of the caches, as a gradient buffer's
        copy = statistics.median(b / (ms / 1000.0) / 1e9 for b, ms in copies if b == big)
    return Link(f"measured: {r} ranks, {bw:.2f} GB/s, {lat_us:.1f} us per step, copies {copy:.2f} GB/s", bw_intra=bw,
                lat_intra=lat_us, per_node=r, copy_gbs=copy, step_collectives=1, tiny_ms=tiny,
                source=f"fitted to the {len(fitted)} all-reduce sizes from {min(x for x, _ in fitted) / 1e6:.1f} MB "
                       f"in {name}; a tiny collective {tiny * 1000:.1f} us")


# ---- the report -------------------------------------------------------------------

def parse_type_ms(text: str) -> Dict[str, Tuple[float, float]]:
    out = {}
    for item in text.split(","):
        if not item.strip():
            continue
        try:
            t, fb = item.split("=")
            f, b = fb.split("/")
            out[t.strip()] = (float(f), float(b))
        except ValueError:
            raise ModelError(f"--type-ms: '{item}' is not TYPE=FORWARD/BACKWARD (ms)")
    return out


def mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.1f} MB"


def report(p: Profile, rows: List[Row], link: Link, reduce_buckets: int, detail: Optional[int], out) -> None:
    plan = plan_buckets(p.params, reduce_buckets)
    total = sum(b.bytes for b in plan_buckets(p.params, 1))
    types = sorted({q.type for q in p.params}, key=TYPES.index)
    print(f"Compute of one rank (measured{', scaled' if p.device == 'scaled' else ''}): forward {p.forward:.2f} ms, "
          f"backward {p.backward:.2f} ms, update {p.update:.2f} ms, step {p.compute:.2f} ms", file=out)
    print(f"Gradients: {sum(q.values for q in p.params):,} values in {'/'.join(types)}, {mb(total)}; "
          f"reduce_buckets {reduce_buckets}: {len(plan)} sums of "
          f"{', '.join(mb(b.bytes) for b in plan)}", file=out)
    print(f"Link: {link.name}", file=out)
    if link.source:
        print(f"  ({link.source})", file=out)
    print("Predicted (each rank keeps its batch; efficiency = step on 1 / step on N):", file=out)
    head = (f"{'ranks':>6} {'nodes':>5} | {'no overlap ms':>13} {'eff':>5} | {'overlap ms':>10} {'eff':>5} "
            f"{'exposed':>8} | {'best buckets':>12} {'ms':>8} {'eff':>5}")
    print(head, file=out)
    base = rows[0].no_overlap.ms if rows and rows[0].ranks == 1 else p.compute
    for r in rows:
        print(f"{r.ranks:>6} {r.nodes:>5} | {r.no_overlap.ms:>13.2f} {base / r.no_overlap.ms:>5.3f} | "
              f"{r.overlap.ms:>10.2f} {base / r.overlap.ms:>5.3f} {r.overlap.exposed:>8.2f} | "
              f"{r.best_buckets:>12} {r.best.ms:>8.2f} {base / r.best.ms:>5.3f}", file=out)
    for r in rows:
        print(f"scaling: ranks={r.ranks} nodes={r.nodes} no_overlap_ms={r.no_overlap.ms:.4f} "
              f"no_overlap_eff={base / r.no_overlap.ms:.4f} overlap_buckets={reduce_buckets} "
              f"overlap_ms={r.overlap.ms:.4f} overlap_eff={base / r.overlap.ms:.4f} "
              f"overlap_exposed_ms={r.overlap.exposed:.4f} best_buckets={r.best_buckets} best_ms={r.best.ms:.4f} "
              f"best_eff={base / r.best.ms:.4f}", file=out)
    if detail:
        r = next((x for x in rows if x.ranks == detail), None)
        if r is None:
            return
        b_start = backward_start(p)
        for label, step in (("overlap", r.overlap), (f"best ({r.best_buckets} buckets)", r.best)):
            print(f"Sums on {r.ranks} ranks, {label} (ms from the step's start; backward {b_start:.2f} to "
                  f"{b_start + p.backward:.2f}):", file=out)
            for b, ready, start, end in step.sums:
                layer = p.layers[b.ready_layer] if 0 <= b.ready_layer < len(p.layers) else "(after backward)"
                print(f"  {b.type:>8} {mb(b.bytes):>9} ready {ready:8.2f} ({layer}) start {start:8.2f} "
                      f"end {end:8.2f}", file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="trainer time logs (several: averaged)")
    ap.add_argument("--ranks", default="1,8,64,256", help="comma-separated rank counts (default 1,8,64,256)")
    ap.add_argument("--reduce-buckets", type=int, default=None,
                    help="the plan with overlap (default: the log's, else 4)")
    ap.add_argument("--link", default="h100-ndr", choices=sorted(LINKS), help="a published link preset")
    ap.add_argument("--link-fit", help="an all-reduce benchmark's output (scaling_link.cpp): the link fitted to it")
    ap.add_argument("--link-fit-min", type=float,
                    help="fit the sizes of at least this many bytes (default: an eighth of the largest sum)")
    for name, what in (("bw-intra", "GB/s per rank within a node"), ("lat-intra", "us per ring step within a node"),
                       ("bw-nic", "GB/s per NIC between nodes"), ("lat-inter", "us per ring step across nodes"),
                       ("base-lat", "us per all-reduce"), ("copy-gbs", "host pack/unpack GB/s (0: none)")):
        ap.add_argument("--" + name, type=float, help=f"override: {what}")
    ap.add_argument("--per-node", type=int, help="override: ranks per node")
    ap.add_argument("--step-collectives", type=int, help="override: tiny collectives per step")
    ap.add_argument("--step-ms", type=float,
                    help="scale the compute to this measured step (another device: e.g. the H100's)")
    ap.add_argument("--type-ms", default="",
                    help="with --step-ms: TYPE=FWD/BWD,... ms per layer type measured on that device, to shape "
                         "the per-layer times before the scaling")
    ap.add_argument("--detail", type=int, help="print the sums' timeline at this ranks count")
    args = ap.parse_args(argv)
    try:
        profiles = []
        for path in args.logs:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    profiles.append(parse_time_log(f.read(), path))
            except OSError as e:
                raise ModelError(f"{path}: {e.strerror}")
        for q in profiles:
            check_plan(q)
        p = average_profiles(profiles)
        if args.step_ms:
            p = scale_profile(p, args.step_ms, parse_type_ms(args.type_ms))
            p.device = "scaled"
        elif args.type_ms:
            raise ModelError("--type-ms needs --step-ms")
        if args.link_fit:
            # By default the sizes from an eighth of the largest sum up: the
            # regime the sums are in.
            largest = max(b.bytes for b in plan_buckets(p.params, 1))
            min_bytes = args.link_fit_min if args.link_fit_min is not None else largest / 8
            try:
                with open(args.link_fit, encoding="utf-8") as f:
                    link = fit_link(f.read(), args.link_fit, min_bytes)
            except OSError as e:
                raise ModelError(f"{args.link_fit}: {e.strerror}")
        else:
            link = LINKS[args.link]
        overrides = {"bw_intra": args.bw_intra, "lat_intra": args.lat_intra, "bw_nic": args.bw_nic,
                     "lat_inter": args.lat_inter, "base": args.base_lat, "copy_gbs": args.copy_gbs,
                     "per_node": args.per_node, "step_collectives": args.step_collectives}
        changed = {k: v for k, v in overrides.items() if v is not None}
        if changed:
            link = replace(link, name=link.name + " (with " + ", ".join(f"{k}={v}" for k, v in changed.items()) + ")",
                           **changed)
        try:
            ranks = [int(x) for x in args.ranks.split(",") if x.strip()]
        except ValueError:
            raise ModelError(f"--ranks={args.ranks}: not a list of integers")
        if not ranks or min(ranks) < 1:
            raise ModelError(f"--ranks={args.ranks}: rank counts are positive")
        n = args.reduce_buckets if args.reduce_buckets is not None else \
            (p.reduce_buckets if p.reduce_buckets is not None else 4)
        rows = predict(p, ranks, link, n)
        report(p, rows, link, n, args.detail, sys.stdout)
    except ModelError as e:
        print(f"scaling_model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
