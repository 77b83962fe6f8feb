"""The training model (models/train/model.py) computes the reference's math (models/rnntd_ref)."""
import os
import tempfile
import unittest

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
from rnntd_ref.decode import greedy_decode
from rnntd_ref.io import export_state_dict, load_model
from rnntd_ref.random_model import build_config
from rnntd_train.model import TrainModel


def small_cfg(durations=(2, 4, 8), act="hard"):
    return build_config(name="t", feature_dim=10, frame_stacking=3, encoder_hidden=[24, 20, 16],
                        time_stacks=[2, 1, 1], embedding=8, predictor_hidden=[12], joint_dim=14,
                        vocab_size=7, big_blank_durations=list(durations), max_symbols=3, lstm_activation=act)


def trained_like(cfg, seed):
    torch.manual_seed(seed)
    m = TrainModel(cfg).double()
    with torch.no_grad():
        m.frontend.mean.uniform_(-1, 1)
        m.frontend.std.uniform_(0.5, 2)
        for p in m.parameters():
            p.mul_(2.0)
        m.joint.out.bias[:cfg.vocab_size] -= 1.0   # fewer labels than blanks, as after training
    return m.float().double()                     # the exported file holds float32 values


class TestTrainModel(unittest.TestCase):
    def setUp(self):
        self.cfg = small_cfg()
        self.m = trained_like(self.cfg, 0)
        tmp = tempfile.mkdtemp()
        tokens = ["\u2581"] + [chr(ord("a") + i) for i in range(self.cfg.vocab_size - 1)]
        export_state_dict(self.cfg, self.m.state_dict(), tokens, tmp)
        self.ref, _ = load_model(tmp, dtype=torch.float64)

    def test_names_and_shapes_are_the_format(self):
        ref_sd = self.ref.state_dict()
        ours = self.m.state_dict()
        self.assertEqual(sorted(ref_sd), sorted(ours))
        for k in ours:
            self.assertEqual(tuple(ours[k].shape), tuple(ref_sd[k].shape), k)

    def test_encoder_and_logits_match_reference(self):
        g = torch.Generator().manual_seed(1)
        lens = torch.tensor([37, 20, 5])
        feats = torch.randn(3, 37, 10, generator=g, dtype=torch.float64)
        labels = torch.randint(0, 7, (3, 4), generator=g)
        f, enc_lens = self.m.encode(feats, lens)
        logits, _ = self.m(feats, lens, labels)
        for b in range(3):
            fr, _ = self.ref.encode(feats[b, :lens[b]])
            self.assertEqual(int(enc_lens[b]), fr.shape[0])
            torch.testing.assert_close(f[b, :fr.shape[0]], fr, rtol=1e-10, atol=1e-12)
            g0, st = self.ref.predictor_init()
            gs = [g0]
            for u in range(4):
                gu, st = self.ref.predictor_step(int(labels[b, u]), st)
                gs.append(gu)
            for t in range(fr.shape[0]):
                for u in range(5):
                    torch.testing.assert_close(logits[b, t, u], self.ref.joint(fr[t], gs[u]),
                                               rtol=1e-10, atol=1e-12)

    def test_batched_greedy_equals_reference_decoding(self):
        for seed in range(4):
            m = trained_like(self.cfg, seed + 10)
            tmp = tempfile.mkdtemp()
            export_state_dict(self.cfg, m.state_dict(), ["\u2581"] + list("abcdef"), tmp)
            ref, _ = load_model(tmp, dtype=torch.float64)
            g = torch.Generator().manual_seed(seed)
            lens = torch.tensor([60, 41, 3, 0])
            feats = torch.randn(4, 60, 10, generator=g, dtype=torch.float64) * 2
            toks, frames, _ = m.greedy(feats, lens)
            for b in range(4):
                rt, rf = greedy_decode(ref, feats[b, :lens[b]])
                self.assertEqual(toks[b], rt, "seed %d item %d" % (seed, b))
                self.assertEqual(frames[b], rf)

    def test_gradients_flow_everywhere(self):
        m = TrainModel(self.cfg)
        feats = torch.randn(2, 30, 10)
        logits, _ = m(feats, torch.tensor([30, 21]), torch.randint(0, 7, (2, 3)))
        logits.logsumexp(-1).sum().backward()
        for name, p in m.named_parameters():
            self.assertIsNotNone(p.grad, name)
            self.assertTrue(bool(torch.isfinite(p.grad).all()), name)


if __name__ == "__main__":
    unittest.main()
