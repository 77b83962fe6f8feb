"""Training with fixed batch shapes (models/train/graph_step.py, FeaturePool.bucket_batches/collate_to,
the weighted loss): every utterance lands in exactly one batch of a shape that holds it, and a batch
padded to its bucket's shape with weight-0 dummy rows gives the same loss and the same gradients as the
plain batch (float64, CPU). The CUDA graph itself runs only on a GPU, which CI lacks: there
`python3 -m rnntd_train.bench_step --modes fn,graph` times the two steps and, in graph mode, prints the
largest loss and gradient differences between an eager step and the graph's replay on another batch of
the same shape (printed, not asserted)."""
import os
import random
import unittest

import torch

from rnntd_ref.config import load_config
from rnntd_train import model as train_model
from rnntd_train.data import FeaturePool
from rnntd_train.graph_step import GraphedStep
from rnntd_train.loss import multiblank_rnnt_loss

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODEL_YAML = os.path.join(ROOT, "models", "train", "en-char-small.yaml")


def random_pool(seed, n, F=80, max_t=700, rate=0.2):
    g = torch.Generator().manual_seed(seed)
    feats, labels = [], []
    for _ in range(n):
        T = int(torch.randint(1, max_t + 1, (1,), generator=g))
        U = int(torch.randint(0, int(rate * T) + 2, (1,), generator=g))
        feats.append(torch.randn(T, F, generator=g).half())
        labels.append(torch.randint(0, 28, (U,), generator=g))
    return FeaturePool.of(feats, labels, torch.device("cpu"))


class TestBuckets(unittest.TestCase):
    def test_every_utterance_once_in_a_shape_that_holds_it(self):
        for seed, (mf, mc, tq) in enumerate([(6000, 400000, 96), (2500, 90000, 48), (700, 10 ** 9, 30)]):
            pool = random_pool(seed, 157)
            batches, dropped = pool.bucket_batches(random.Random(seed), mf, mc, 6, tq)
            shapes = pool.bucket_shapes(mf, mc, 6, tq)
            seen = []
            for idx, (B, T, U) in batches:
                self.assertIn((B, T, U), shapes)
                self.assertTrue(1 <= len(idx) <= B)
                self.assertEqual(T % 6, 0)
                self.assertTrue(B * T <= mf or B == 1)
                self.assertTrue(B * (T // 6 + 1) * (U + 1) <= mc or B == 1)
                for i in idx:
                    self.assertLessEqual(pool.feats[i].shape[0], T)
                    self.assertLessEqual(len(pool.labels[i]), U)
                seen += idx
            self.assertEqual(len(seen), len(set(seen)))
            self.assertEqual(len(seen) + dropped, len(pool))
            self.assertLess(dropped, len(pool) * 0.05)

    def test_shapes_frozen_at_first_call(self):
        pool = random_pool(5, 60)
        s1 = pool.bucket_shapes(6000, 400000, 6)
        more = random_pool(6, 60, max_t=1500, rate=0.5)
        pool.feats += more.feats
        pool.labels += more.labels
        pool.meta += more.meta
        self.assertEqual(pool.bucket_shapes(6000, 400000, 6), s1)
        batches, dropped = pool.bucket_batches(random.Random(1), 6000, 400000, 6)
        self.assertEqual(sum(len(i) for i, _ in batches) + dropped, len(pool))

    def test_collate_to_pads_with_weight_zero_rows(self):
        pool = random_pool(3, 20)
        idx = [4, 0, 7]
        B, T, U = 5, max(pool.feats[i].shape[0] for i in idx) + 5, max(len(pool.labels[i]) for i in idx) + 3
        feats, flen, labels, ulen, w = pool.collate_to(idx, (B, T, U))
        self.assertEqual(tuple(feats.shape), (B, T, 80))
        self.assertEqual(w.tolist(), [1.0, 1.0, 1.0, 0.0, 0.0])
        f0, fl0, l0, ul0 = pool.collate(idx)
        self.assertTrue(torch.equal(feats[:3, :f0.shape[1]], f0))
        self.assertEqual(int(feats[:3, f0.shape[1]:].abs().sum()), 0)
        self.assertEqual(flen[:3].tolist(), fl0.tolist())
        self.assertEqual(ulen.tolist(), ul0.tolist() + [0, 0])
        self.assertTrue(torch.equal(labels[:3, :l0.shape[1]], l0))
        self.assertEqual(flen[3:].tolist(), [T, T])


class TestWeightedStep(unittest.TestCase):
    def test_padded_batch_same_loss_and_gradients(self):
        cfg = load_config(MODEL_YAML)
        torch.manual_seed(0)
        m = train_model.TrainModel(cfg).double()
        pool = random_pool(9, 12, max_t=130)
        idx = [1, 5, 2]                                          # B = 3 real rows, odd lengths
        durs = list(cfg.big_blank_durations)

        def compute(feats, flen, labels, ulen, weight=None):
            logits, enc_lens = m(feats.double(), flen, labels)
            return multiblank_rnnt_loss(logits, labels, enc_lens, ulen, durs, 0.1, weights=weight)

        step = GraphedStep(m, compute, enabled=True)           # no CUDA here: every call runs eagerly
        self.assertFalse(step.enabled)
        feats, flen, labels, ulen = pool.collate(idx)
        loss0 = compute(feats, flen, labels, ulen)
        m.zero_grad(set_to_none=True)
        loss0.backward()
        g0 = [p.grad.clone() for p in m.parameters()]
        for p in m.parameters():
            p.grad = torch.full_like(p, 7.0)                     # the step must zero, not accumulate
        T = (max(pool.feats[i].shape[0] for i in idx) // 6 + 2) * 6
        U = max(len(pool.labels[i]) for i in idx) + 5
        loss1 = step(*pool.collate_to(idx, (5, T, U)))
        self.assertTrue(torch.allclose(loss1, loss0.detach(), rtol=1e-10, atol=1e-10), (loss1, loss0))
        for (name, p), g in zip(m.named_parameters(), g0):
            self.assertTrue(torch.allclose(p.grad, g, rtol=1e-8, atol=1e-10), name)


if __name__ == "__main__":
    unittest.main()
