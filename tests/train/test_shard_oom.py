"""Taking in a shard when the device is full (piece 11 died in FeaturePool.add_manifest with 61.6 GiB held by
the training step's CUDA graphs): add_manifest is all or nothing, add_manifest_retrying frees memory (the
trainer: drops the graphs) and tries once more, then reports instead of raising; GraphedStep.release
drops the graphs. CPU only: the out-of-memory errors are injected into the pool's frontend."""
import os
import tempfile
import unittest

import torch

from rnntd_ref.config import load_config
from rnntd_train.data import FeaturePool, add_manifest_retrying, is_out_of_memory
from rnntd_train.graph_step import GraphedStep
from test_gpu_channel import MODEL_YAML, write_corpus

OOM = "CUDA out of memory. Tried to allocate 2.00 GiB (injected)"


class FailingFrontend:
    """The pool's LogMel, raising RuntimeError(message) on the calls numbered in fail_at (1-based)."""

    def __init__(self, lm, fail_at, message=OOM):
        self.lm, self.fail_at, self.message, self.calls = lm, set(fail_at), message, 0

    def batch(self, *args, **kw):
        self.calls += 1
        if self.calls in self.fail_at:
            raise RuntimeError(self.message)
        return self.lm.batch(*args, **kw)


def snapshot(pool):
    return ([f.clone() for f in pool.feats], [w.clone() for w in pool.waves], [l.clone() for l in pool.labels],
            [dict(m) for m in pool.meta])


class TestShardOutOfMemory(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cfg = load_config(MODEL_YAML)
        cls.tmp = tempfile.TemporaryDirectory()
        for k, n in enumerate((9, 7)):
            os.makedirs(os.path.join(cls.tmp.name, "s%d" % k))
            write_corpus(os.path.join(cls.tmp.name, "s%d" % k), n, seed=40 + k)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def pool(self):
        return FeaturePool(self.cfg.frontend, torch.device("cpu"), max_seconds=30.0, keep_waves=True)

    def manifest(self, k):
        return os.path.join(self.tmp.name, "s%d" % k, "manifest.jsonl")

    def assertSamePool(self, a, b):
        for x, y in zip(snapshot(a), snapshot(b)):
            self.assertEqual(len(x), len(y))
            for u, v in zip(x, y):
                if isinstance(u, torch.Tensor):
                    self.assertTrue(torch.equal(u, v))
                else:
                    self.assertEqual(u, v)

    def test_failed_add_leaves_the_pool_as_it_was(self):
        ref = self.pool()
        ref.add_manifest(self.manifest(0), batch_seconds=1.0)
        pool = self.pool()
        pool.add_manifest(self.manifest(0), batch_seconds=1.0)
        before = snapshot(pool)
        pool.lm = FailingFrontend(pool.lm, fail_at=[3])          # part way through the second shard
        with self.assertRaises(RuntimeError):
            pool.add_manifest(self.manifest(1), batch_seconds=1.0)
        self.assertGreater(pool.lm.calls, 2)
        self.assertEqual(len(pool), 9)
        for x, y in zip(before, snapshot(pool)):
            self.assertEqual(len(x), len(y))
        self.assertSamePool(pool, ref)
        # and then the shard goes in whole, as into a pool that never failed
        pool.lm = pool.lm.lm
        self.assertEqual(pool.add_manifest(self.manifest(1), batch_seconds=1.0), 7)
        ref.add_manifest(self.manifest(1), batch_seconds=1.0)
        self.assertSamePool(pool, ref)

    def test_retry_after_freeing(self):
        ref = self.pool()
        ref.add_manifest(self.manifest(1), batch_seconds=1.0)
        pool = self.pool()
        pool.lm = FailingFrontend(pool.lm, fail_at=[1])
        freed = []
        n, why = add_manifest_retrying(pool, self.manifest(1), lambda: freed.append(1))
        self.assertEqual((n, why, len(freed)), (7, None, 1))
        pool.lm = pool.lm.lm
        self.assertSamePool(pool, ref)

    def test_out_of_memory_twice_is_reported_not_raised(self):
        pool = self.pool()
        pool.lm = FailingFrontend(pool.lm, fail_at=range(1, 100))
        freed = []
        n, why = add_manifest_retrying(pool, self.manifest(0), lambda: freed.append(1))
        self.assertIsNone(n)
        self.assertIn("out of memory twice", why)
        self.assertEqual((len(freed), len(pool), len(pool.waves), len(pool.meta)), (1, 0, 0, 0))

    def test_other_errors_propagate_without_freeing(self):
        pool = self.pool()
        pool.lm = FailingFrontend(pool.lm, fail_at=[1], message="cuFFT error: CUFFT_INTERNAL_ERROR")
        freed = []
        with self.assertRaises(RuntimeError):
            add_manifest_retrying(pool, self.manifest(0), lambda: freed.append(1))
        self.assertEqual((freed, len(pool)), ([], 0))
        self.assertFalse(is_out_of_memory(ValueError("out of memory")))
        self.assertTrue(is_out_of_memory(RuntimeError(OOM)))

    def test_release_without_graphs(self):
        model = torch.nn.Linear(3, 2)
        logs = []
        step = GraphedStep(model, lambda x: model(x).sum(), enabled=False, log=logs.append)
        self.assertEqual(step.release("test"), 0)
        self.assertEqual((step.releases, len(step.graphs), step.pool), (1, 0, None))
        self.assertEqual(logs[-1]["event"], "graphs_released")
        self.assertTrue(all(p.grad is not None for p in model.parameters()))


if __name__ == "__main__":
    unittest.main()
