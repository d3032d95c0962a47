#!/usr/bin/env python3
"""Tests of scripts/bench/scaling_model.py.

    python3 tests/scripts/scaling_model_test.py TRAINER

The formulas on a hand-made log (zero latency and a known bandwidth give
exact step times; then the latencies and the link between nodes one at a
time), that overlapping the sums with backward never predicts a slower step
than summing the same buckets after it, the link fitted back from exact
samples, bad input, and the real trainer's `trainer time` log: parsed, its
plan re-planned by the script for other bucket counts equal to the
trainer's own plan for those counts, and the whole report. Standard library
only.
"""
import io
import os
import random
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))
import scaling_model as sm  # noqa: E402

TRAINER = None

# Three layers; backward takes 4 ms in ip1 and 2 ms in ip2 (6 ms in all, as
# the `time:` line says), forward 3 ms, update 1 ms. ip2's two parameters
# (250,000 FLOAT values each, 1 MB) are complete after ip2, ip1's weights
# (500,000 values, 2 MB) after ip1. The trainer's plan for 2 buckets: 2 MB
# after ip2, 2 MB after ip1.
HAND_LOG = """\
I0101 00:00:00.000000  1 trainer.cpp:1] Median time per layer over 5 iterations (stream synchronized after each layer):
I0101 00:00:00.000000  1 trainer.cpp:1]                 data\tforward: 1 ms.
I0101 00:00:00.000000  1 trainer.cpp:1]                 data\tbackward: 0 ms.
I0101 00:00:00.000000  1 trainer.cpp:1]                  ip1\tforward: 1 ms.
I0101 00:00:00.000000  1 trainer.cpp:1]                  ip1\tbackward: 4 ms.
I0101 00:00:00.000000  1 trainer.cpp:1]                  ip2\tforward: 1 ms.
I0101 00:00:00.000000  1 trainer.cpp:1]                  ip2\tbackward: 2 ms.
Layers by cost (median ms over 5 iterations, synchronized after each layer):
 rank  layer                       type                     forward   backward      total   share
    1  ip1                         InnerProduct               1.000      4.000      5.000   55.6%
    2  ip2                         InnerProduct               1.000      2.000      3.000   33.3%
    3  data                        DummyData                  1.000      0.000      1.000   11.1%
Gradient sums across ranks, reduce_buckets 2: 2 sums. NCCL starts each bucket after the layer named
bucket: index=0 type=FLOAT values=500000 bytes=2000000 params=2 ready_layer=2 ready_layer_name=ip2
bucket: index=1 type=FLOAT values=500000 bytes=2000000 params=1 ready_layer=1 ready_layer_name=ip1
param: index=2 type=FLOAT values=250000 ready_layer=2 ready_layer_name=ip2
param: index=3 type=FLOAT values=250000 ready_layer=2 ready_layer_name=ip2
param: index=0 type=FLOAT values=500000 ready_layer=1 ready_layer_name=ip1
time: device=cpu iterations=5 warmup=1 batch=4 params=1000000 trained_params=1000000 forward_ms_median=3.0000 \
backward_ms_median=6.0000 update_ms_median=1.0000 total_ms_median=10.0000 loop_ms_mean=0.0000
"""

# 1 GB/s, no latency: a ring all-reduce of B bytes on p ranks takes
# 2(p-1)/p * B / 1e9 s.
SLOW = sm.Link("test", bw_intra=1.0, lat_intra=0.0, per_node=8)


class Formulas(unittest.TestCase):
    def setUp(self):
        self.p = sm.parse_time_log(HAND_LOG)

    def test_parsed(self):
        p = self.p
        self.assertEqual(p.layers, ["data", "ip1", "ip2"])
        self.assertEqual(p.layer_backward, [0.0, 4.0, 2.0])
        self.assertEqual((p.forward, p.backward, p.update, p.compute), (3.0, 6.0, 1.0, 10.0))
        self.assertEqual(p.layer_types["ip1"], "InnerProduct")
        self.assertEqual(p.reduce_buckets, 2)
        self.assertEqual(p.buckets, [sm.Bucket("FLOAT", 500000, 2, 2), sm.Bucket("FLOAT", 500000, 1, 1)])
        sm.check_plan(p)  # the re-plan is the trainer's plan
        self.assertEqual(sm.plan_buckets(p.params, 1), [sm.Bucket("FLOAT", 1000000, 3, -1)])

    def test_allreduce(self):
        self.assertEqual(sm.allreduce_ms(1e6, 1, SLOW), 0.0)
        self.assertAlmostEqual(sm.allreduce_ms(1e6, 2, SLOW), 1.0)   # 2*1/2 * 1 MB / 1 GB/s
        self.assertAlmostEqual(sm.allreduce_ms(2e6, 4, SLOW), 3.0)   # 2*3/4 * 2 MB
        lat = sm.Link("lat", bw_intra=1.0, lat_intra=10.0, base=5.0, per_node=8)
        self.assertAlmostEqual(sm.allreduce_ms(1e6, 4, lat), 3 * 0.5 / 1 * 1.0 + (5 + 6 * 10) / 1000)
        # 16 ranks on 2 nodes: the ring's bandwidth is the node's 8 NICs (8 *
        # 10 = 80 GB/s < 450), 4 of its 30 steps cross nodes.
        two = sm.Link("two", bw_intra=450.0, lat_intra=1.0, bw_nic=10.0, lat_inter=7.0, base=2.0, per_node=8)
        self.assertAlmostEqual(sm.allreduce_ms(8e7, 16, two), 2 * 15 / 16 * 8e7 / 80e9 * 1e3 + (2 + 26 * 1 + 4 * 7) / 1e3)
        # Within a node the NICs do not count.
        self.assertAlmostEqual(sm.allreduce_ms(8e7, 8, two), 2 * 7 / 8 * 8e7 / 450e9 * 1e3 + (2 + 14 * 1) / 1e3)

    def test_steps(self):
        p = self.p
        plan = sm.plan_buckets(p.params, 2)
        whole = sm.plan_buckets(p.params, 1)
        self.assertEqual(sm.simulate(p, whole, 1, SLOW, overlap=False).ms, 10.0)
        # No overlap, 2 ranks: 4 MB after backward, 4 ms: 3 + 6 + 4 + 1.
        self.assertAlmostEqual(sm.simulate(p, whole, 2, SLOW, overlap=False).ms, 14.0)
        # Overlap, 2 ranks: bucket 0 ready when ip2's backward ends (3 + 2),
        # 2 ms; bucket 1 when ip1's ends (3 + 2 + 4 = 9), 2 ms: 11, + update.
        s = sm.simulate(p, plan, 2, SLOW, overlap=True)
        self.assertEqual([(round(r, 9), round(a, 9), round(e, 9)) for _, r, a, e in s.sums],
                         [(5.0, 5.0, 7.0), (9.0, 9.0, 11.0)])
        self.assertAlmostEqual(s.ms, 12.0)
        self.assertAlmostEqual(s.exposed, 2.0)
        # 4 ranks: 3 ms a bucket; the first ends at 8, before the second is ready.
        self.assertAlmostEqual(sm.simulate(p, plan, 4, SLOW, overlap=True).ms, 13.0)
        self.assertAlmostEqual(sm.simulate(p, whole, 4, SLOW, overlap=False).ms, 16.0)
        # A link four times slower: bucket 0 (5 to 13) keeps bucket 1 waiting
        # until 13; it ends at 21.
        slow4 = sm.Link("slow", bw_intra=0.25, lat_intra=0.0, per_node=8)
        self.assertAlmostEqual(sm.simulate(p, plan, 2, slow4, overlap=True).ms, 22.0)
        # Host engines: two copies of each bucket at copy_gbs, one tiny collective a step.
        host = sm.Link("host", bw_intra=1.0, lat_intra=100.0, per_node=2, copy_gbs=2.0, step_collectives=1)
        self.assertAlmostEqual(sm.simulate(p, whole, 2, host, overlap=False).ms,
                               10.0 + (4.0 + 0.2) + 2 * 4e6 / 2e9 * 1e3 + (8 * 1 / 1e9 * 1e3 + 0.2))

    def test_training_loop_is_the_compute(self):
        p = sm.parse_time_log(HAND_LOG.replace("loop_ms_mean=0.0000", "loop_ms_mean=11.0000"))
        self.assertEqual(p.compute, 11.0)
        whole = sm.plan_buckets(p.params, 1)
        self.assertAlmostEqual(sm.simulate(p, whole, 1, SLOW, overlap=False).ms, 11.0)
        self.assertAlmostEqual(sm.simulate(p, whole, 2, SLOW, overlap=False).ms, 15.0)

    def test_scaled_to_another_device(self):
        # To a 5 ms step: every part scaled by one half, the update keeping its share.
        q = sm.scale_profile(self.p, 5.0)
        self.assertAlmostEqual(q.compute, 5.0)
        self.assertAlmostEqual(q.update, 0.5)
        self.assertAlmostEqual(q.backward, 3.0)
        self.assertAlmostEqual(q.layer_backward[1], 2.0)
        # Shaped by type first: the InnerProducts take 1/1 ms there (forward
        # 2 -> 1, backward 6 -> 1), DummyData keeps its share of them (1 of
        # 8 -> 0.25 of 2), then the layers fill 4.5 ms.
        q = sm.scale_profile(self.p, 5.0, {"InnerProduct": (1.0, 1.0)})
        self.assertAlmostEqual(q.compute, 5.0)
        self.assertAlmostEqual(sum(q.layer_forward) + sum(q.layer_backward), 4.5)
        self.assertAlmostEqual(q.layer_backward[1] / q.layer_backward[2], 2.0)
        self.assertAlmostEqual(q.layer_forward[0] / (q.layer_forward[1] + q.layer_forward[2]), 0.25)


def random_profile(rng):
    n = rng.randint(2, 30)
    layers = [f"l{i}" for i in range(n)]
    params = []
    for layer in range(n - 1, -1, -1):
        for _ in range(rng.randint(0, 3)):
            params.append(sm.Param(len(params), rng.choice(["FLOAT", "FLOAT16"]), rng.randint(1, 10**7), layer))
    if not params:
        params.append(sm.Param(0, "FLOAT", 1000, 0))
    back = [rng.uniform(0, 5) for _ in layers]
    return sm.Profile(layers=layers, layer_forward=[rng.uniform(0, 2) for _ in layers], layer_backward=back,
                      forward=rng.uniform(1, 50), backward=sum(back) * rng.uniform(0.8, 1.2),
                      update=rng.uniform(0, 5), params=params)


class Overlap(unittest.TestCase):
    def test_never_slower(self):
        rng = random.Random(7)
        for _ in range(300):
            p = random_profile(rng)
            link = sm.Link("r", bw_intra=rng.uniform(1, 500), lat_intra=rng.uniform(0, 50), bw_nic=rng.uniform(1, 50),
                           lat_inter=rng.uniform(0, 50), base=rng.uniform(0, 20), per_node=8)
            for ranks in (1, 2, 8, 64, 256):
                whole = sm.simulate(p, sm.plan_buckets(p.params, 1), ranks, link, overlap=False)
                for n in (2, 3, 4, 8, 25):
                    plan = sm.plan_buckets(p.params, n)
                    with_overlap = sm.simulate(p, plan, ranks, link, overlap=True)
                    after = sm.simulate(p, plan, ranks, link, overlap=False)
                    self.assertLessEqual(with_overlap.ms, after.ms + 1e-9)
                    self.assertGreaterEqual(with_overlap.ms, p.compute - 1e-9)
                row = sm.predict(p, [ranks], link, 4)[0]
                self.assertLessEqual(row.best.ms, whole.ms + 1e-9)
                self.assertLessEqual(row.best.ms, row.overlap.ms + 1e-9)
                self.assertAlmostEqual(row.no_overlap.ms, whole.ms)

    def test_plan_rule(self):
        rng = random.Random(3)
        for _ in range(200):
            p = random_profile(rng)
            for n in (2, 3, 5, 16):
                plan = sm.plan_buckets(p.params, n)
                for t in ("FLOAT", "FLOAT16"):
                    total = sum(q.values for q in p.params if q.type == t)
                    mine = [b for b in plan if b.type == t]
                    self.assertEqual(sum(b.values for b in mine), total)
                    self.assertLessEqual(len(mine), n)
                    self.assertEqual(sum(b.params for b in mine), sum(1 for q in p.params if q.type == t))
                ready = [b.ready_layer for b in plan if b.ready_layer >= 0]
                self.assertEqual(ready, sorted(ready, reverse=True))


class Link(unittest.TestCase):
    def test_fit_recovers_the_link(self):
        # 4 ranks, 20 us a step, 3 GB/s.
        lines = []
        for b in (4096, 65536, 1 << 20, 16 << 20, 64 << 20):
            ms = 6 * 0.020 + 2 * 3 / 4 * b / 3e9 * 1e3
            lines.append(f"link: ranks=4 bytes={b} ms={ms:.9f}")
        lines.append("copy: bytes=1000000 ms=0.1")
        link = sm.fit_link("\n".join(lines))
        self.assertAlmostEqual(link.lat_intra, 20.0, places=3)
        self.assertAlmostEqual(link.bw_intra, 3.0, places=4)
        self.assertEqual(link.per_node, 4)
        self.assertAlmostEqual(link.copy_gbs, 10.0)
        self.assertAlmostEqual(sm.allreduce_ms(16 << 20, 4, link), 6 * 0.020 + 1.5 * (16 << 20) / 3e9 * 1e3, places=6)

    def test_fit_takes_the_sizes_of_the_sums(self):
        # In cache up to 2 MB (10 GB/s), 1 GB/s beyond: fitted from 4 MB up,
        # the link is the second; a tiny collective costs the smallest size's time.
        lines = []
        for b in (4096, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 32 << 20):
            ms = 0.004 + b / (10e9 if b <= 2 << 20 else 1e9) * 1e3
            lines.append(f"link: ranks=2 bytes={b} ms={ms:.9f}")
        link = sm.fit_link("\n".join(lines), min_bytes=4 << 20)
        self.assertAlmostEqual(link.bw_intra, 1.0, places=4)
        self.assertAlmostEqual(link.lat_intra, 2.0, places=2)  # 0.004 ms over 2 steps
        self.assertAlmostEqual(link.tiny_ms, 0.004 + 4096 / 10e9 * 1e3)
        # Fitted to every size, the rate in cache wins: several times the large sums' rate.
        self.assertGreater(sm.fit_link("\n".join(lines)).bw_intra, 3.0)

    def test_bad_input(self):
        with self.assertRaises(sm.ModelError):
            sm.fit_link("link: ranks=2 bytes=10 ms=1\n")
        with self.assertRaises(sm.ModelError):
            sm.parse_time_log("I0101 00:00:00 1 x.cpp:1] Iteration 10, loss = 1\n", "train.log")
        no_plan = "\n".join(x for x in HAND_LOG.splitlines() if not x.startswith("param:"))
        with self.assertRaisesRegex(sm.ModelError, "param:"):
            sm.parse_time_log(no_plan)
        wrong = sm.parse_time_log(HAND_LOG.replace("values=500000 bytes=2000000 params=2", "values=400000 bytes=1600000 params=2"))
        with self.assertRaisesRegex(sm.ModelError, "re-plan"):
            sm.check_plan(wrong)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.log")
            with open(path, "w") as f:
                f.write("nothing\n")
            err = io.StringIO()
            stderr, sys.stderr = sys.stderr, err
            try:
                self.assertEqual(sm.main([path]), 1)
                self.assertEqual(sm.main([os.path.join(d, "missing.log")]), 1)
            finally:
                sys.stderr = stderr
            self.assertIn("x.log: no per-layer lines", err.getvalue())
            self.assertIn("missing.log", err.getvalue())


NET = """
name: "ScalingModelTest"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 4 dim: 32 } shape { dim: 4 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 64 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" backward_type: FLOAT16
  inner_product_param { num_output: 48 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "ip2" top: "ip2" }
layer { name: "ip3" type: "InnerProduct" bottom: "ip2" top: "ip3"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip3" bottom: "label" top: "loss" }
"""


class RealLog(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        net = os.path.join(cls.dir.name, "net.prototxt")
        with open(net, "w") as f:
            f.write(NET)
        cls.logs = {}
        for n in (1, 3, 5):
            r = subprocess.run([TRAINER, "time", f"--model={net}", "--iterations=2", "--warmup=1",
                                f"--reduce_buckets={n}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=dict(os.environ, GLOG_logtostderr="1"))
            if r.returncode != 0:
                raise AssertionError(f"trainer time failed:\n{r.stdout[-3000:]}")
            cls.logs[n] = r.stdout
            with open(os.path.join(cls.dir.name, f"time{n}.log"), "w") as f:
                f.write(r.stdout)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_parsed(self):
        p = sm.parse_time_log(self.logs[3])
        self.assertEqual(p.layers, ["data", "ip1", "relu1", "ip2", "relu2", "ip3", "loss"])
        self.assertEqual(p.layer_types["ip2"], "InnerProduct")
        self.assertEqual(p.reduce_buckets, 3)
        self.assertGreater(p.backward, 0)
        self.assertGreater(p.loop, 0)
        self.assertEqual(p.batch, 4)
        # ip3's weights and bias first, ip1's last; ip2's in FLOAT16.
        self.assertEqual([(q.ready_layer, q.type, q.values) for q in p.params],
                         [(5, "FLOAT", 480), (5, "FLOAT", 10), (3, "FLOAT16", 3072), (3, "FLOAT16", 48),
                          (1, "FLOAT", 2048), (1, "FLOAT", 64)])

    def test_replan_is_the_trainers_plan(self):
        # The script's re-plan from one log is the trainer's own plan for
        # every count.
        base = sm.parse_time_log(self.logs[3])
        for n, text in self.logs.items():
            q = sm.parse_time_log(text)
            self.assertEqual(q.reduce_buckets, n)
            self.assertEqual(sm.plan_buckets(base.params, n), q.buckets, f"reduce_buckets {n}")
        self.assertEqual([b.ready_layer for b in sm.parse_time_log(self.logs[1]).buckets], [-1, -1])

    def test_report(self):
        # Two runs of the net (averaged); the plan with overlap is the first log's.
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench", "scaling_model.py"),
                            os.path.join(self.dir.name, "time3.log"), os.path.join(self.dir.name, "time5.log"),
                            "--detail", "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [sm.key_values(x) for x in r.stdout.splitlines() if x.startswith("scaling: ")]
        self.assertEqual([int(x["ranks"]) for x in rows], [1, 8, 64, 256])
        self.assertEqual([int(x["nodes"]) for x in rows], [1, 1, 8, 32])
        self.assertAlmostEqual(float(rows[0]["no_overlap_eff"]), 1.0)
        for x in rows:
            self.assertEqual(int(x["overlap_buckets"]), 3)
            self.assertLessEqual(float(x["best_ms"]), float(x["no_overlap_ms"]) + 1e-3)
        self.assertIn("Sums on 8 ranks", r.stdout)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: scaling_model_test.py TRAINER", file=sys.stderr)
        sys.exit(2)
    TRAINER = sys.argv.pop(1)
    unittest.main()
