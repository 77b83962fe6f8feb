"""Batch preparation (models/train/data.py): FeaturePool.collate and spec_augment against the plain
per-utterance loops they replaced (the same tensors exactly, and the same random draws)."""
import random
import unittest

import torch

from rnntd_train.data import FeaturePool, spec_augment

SPEC = {"freq_masks": 2, "freq_width": 12, "time_masks": 2, "time_width": 25}


def collate_loop(pool, idx):
    """The per-utterance padding the pool used before."""
    T = max(pool.feats[i].shape[0] for i in idx)
    U = max(max(len(pool.labels[i]) for i in idx), 1)
    feats = torch.zeros(len(idx), T, pool.feats[idx[0]].shape[1])
    labels = torch.zeros(len(idx), U, dtype=torch.long)
    flen = torch.zeros(len(idx), dtype=torch.long)
    ulen = torch.zeros(len(idx), dtype=torch.long)
    for k, i in enumerate(idx):
        f = pool.feats[i]
        feats[k, :f.shape[0]] = f.float()
        labels[k, :len(pool.labels[i])] = pool.labels[i]
        flen[k], ulen[k] = f.shape[0], len(pool.labels[i])
    return feats, flen, labels, ulen


def spec_augment_loop(feats, flen, mean, rng, cfg):
    """SpecAugment as it was: each mask's slice filled in turn."""
    B, T, F = feats.shape
    for b in range(B):
        for _ in range(cfg["freq_masks"]):
            w = rng.randint(0, cfg["freq_width"])
            f0 = rng.randint(0, F - w)
            feats[b, :, f0:f0 + w] = mean[f0:f0 + w]
        L = int(flen[b])
        for _ in range(cfg["time_masks"]):
            w = rng.randint(0, min(cfg["time_width"], max(L // 10, 1)))
            t0 = rng.randint(0, max(L - w, 0))
            feats[b, t0:t0 + w] = mean
    return feats


def random_pool(seed, n, F=80, max_t=301, max_u=23, empty_labels=False):
    g = torch.Generator().manual_seed(seed)
    feats, labels = [], []
    for _ in range(n):
        T = int(torch.randint(1, max_t + 1, (1,), generator=g))
        U = 0 if empty_labels else int(torch.randint(0, max_u + 1, (1,), generator=g))
        feats.append(torch.randn(T, F, generator=g).half())
        labels.append(torch.randint(0, 28, (U,), generator=g))
    return FeaturePool.of(feats, labels, torch.device("cpu"))


class TestCollate(unittest.TestCase):
    def test_same_as_loop(self):
        for seed, n, idx in ((1, 1, [0]), (2, 17, list(range(17))), (3, 40, [5, 3, 39, 0, 12, 12, 7]),
                             (4, 9, [8, 0, 4])):
            pool = random_pool(seed, n)
            got, want = pool.collate(idx), collate_loop(pool, idx)
            for g, w, name in zip(got, want, ("feats", "flen", "labels", "ulen")):
                self.assertEqual(g.dtype, w.dtype, name)
                self.assertTrue(torch.equal(g, w), "%s differs (seed %d)" % (name, seed))

    def test_no_labels(self):
        pool = random_pool(5, 3, empty_labels=True)
        feats, flen, labels, ulen = pool.collate([0, 1, 2])
        self.assertEqual(tuple(labels.shape), (3, 1))
        self.assertTrue(torch.equal(labels, collate_loop(pool, [0, 1, 2])[2]))
        self.assertEqual(ulen.tolist(), [0, 0, 0])


class TestSpecAugment(unittest.TestCase):
    def check(self, pool, idx, cfg, seed):
        feats, flen, _, _ = pool.collate(idx)
        mean = torch.randn(feats.shape[2], generator=torch.Generator().manual_seed(seed))
        r1, r2 = random.Random(seed), random.Random(seed)
        got = spec_augment(feats.clone(), flen, mean, r1, cfg)
        want = spec_augment_loop(feats.clone(), flen, mean, r2, cfg)
        self.assertTrue(torch.equal(got, want), "masks differ (seed %d, cfg %s)" % (seed, cfg))
        self.assertEqual(r1.getstate(), r2.getstate(), "a different number of random draws")
        return feats, got

    def test_same_as_loop(self):
        for seed, n in ((11, 1), (12, 7), (13, 33)):
            pool = random_pool(seed, n)
            feats, got = self.check(pool, list(range(n)), SPEC, seed)
            self.assertFalse(torch.equal(feats, got), "nothing was masked")   # the test can see masks

    def test_other_settings(self):
        pool = random_pool(21, 12, F=17, max_t=9)          # short utterances: time widths of 0..1
        self.check(pool, list(range(12)), SPEC, 21)
        self.check(pool, list(range(12)), {"freq_masks": 0, "freq_width": 5, "time_masks": 3, "time_width": 4}, 22)
        self.check(pool, list(range(12)), {"freq_masks": 3, "freq_width": 17, "time_masks": 0, "time_width": 4}, 23)
        feats, got = self.check(pool, [0, 1], {"freq_masks": 0, "freq_width": 1, "time_masks": 0, "time_width": 1}, 24)
        self.assertTrue(torch.equal(feats, got))


if __name__ == "__main__":
    unittest.main()
