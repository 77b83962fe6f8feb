"""The per-replay random channel (models/train/gpu_channel.py) and the pool's features through it
(FeaturePool keep_waves, collate_to(channel=)), and the optimiser state a piece carries (train.save_opt /
load_opt). CPU only; the same code runs on the GPU in training."""
import os
import random
import tempfile
import unittest
import wave

import numpy as np
import torch

from rnntd_ref.config import load_config
from rnntd_train.data import FeaturePool
from rnntd_train.gpu_channel import GpuChannel, coloured_noise, room_responses
from rnntd_train.model import TrainModel
from rnntd_train.train import load_opt, save_opt

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODEL_YAML = os.path.join(ROOT, "models", "train", "en-char-small.yaml")
OFF = {"p_rir": 0.0, "p_noise": 0.0, "p_level": 0.0, "p_vtlp": 0.0}


def write_corpus(folder, n, seed):
    """n WAVs of tones in noise with odd lengths and a manifest (half with a synthesised room)."""
    g = np.random.default_rng(seed)
    with open(os.path.join(folder, "manifest.jsonl"), "w") as mf:
        for i in range(n):
            N = int(g.integers(6000, 40000))
            t = np.arange(N) / 16000.0
            x = 0.3 * np.sin(2 * np.pi * g.uniform(100, 900) * t) + 0.01 * g.standard_normal(N)
            p = "u%03d.wav" % i
            with wave.open(os.path.join(folder, p), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(16000)
                w.writeframes((x * 32767).astype("<i2").tobytes())
            aug = {"rir": [0.3, 5.0, 1]} if i % 2 else {}
            mf.write('{"path": "%s", "duration": %f, "text": "ab c", "aug": %s, "vtlp": 1.0}\n'
                     % (p, N / 16000.0, "{\"rir\": [0.3, 5.0, 1]}" if aug else "{}"))


class TestChannel(unittest.TestCase):
    def test_room_and_noise_pieces(self):
        g = torch.Generator().manual_seed(1)
        h = room_responses(torch.tensor([0.2, 0.8]), torch.tensor([0.0, 12.0]), 8000, 16000, g)
        self.assertEqual(tuple(h.shape), (2, 8000))
        self.assertTrue(torch.all(h[:, 0] == 1.0))
        tail = h[:, 1:].pow(2).sum(1)
        self.assertAlmostEqual(float(tail[0]), 1.0, places=4)                 # 0 dB: tail = direct
        self.assertAlmostEqual(float(tail[1]), 10 ** -1.2, places=4)          # 12 dB below
        # the shorter RT60 decays faster: little energy in its second half
        self.assertLess(float(h[0, 4000:].pow(2).sum()), 1e-3 * float(h[1, 4000:].pow(2).sum()))
        z = coloured_noise(3, 4001, torch.tensor([0.0, 1.0, 2.0]), g, "cpu")
        self.assertTrue(torch.allclose(z.pow(2).mean(1), torch.ones(3), atol=1e-4))
        lo = torch.fft.rfft(z, dim=1).abs().pow(2)[:, 1:200].mean(1) / torch.fft.rfft(z, dim=1).abs().pow(2)[:, 1000:].mean(1)
        self.assertLess(float(lo[0]), 2.0)           # white: flat
        self.assertGreater(float(lo[1]), 5.0)        # pink: more low-frequency power
        self.assertGreater(float(lo[2]), float(lo[1]))

    def test_lengths_kept_and_snr(self):
        B, N = 5, 9001
        lens = [9001, 7777, 5003, 1201, 8000]
        x = torch.zeros(B, N)
        for b, L in enumerate(lens):
            x[b, :L] = 0.2 * torch.sin(torch.arange(L) * 0.05)
        ch = GpuChannel({"p_rir": 1.0, "p_noise": 1.0, "snr": [10.0, 10.0], "p_level": 0.0, "p_vtlp": 1.0}, 16000, "cpu")
        y, warp = ch(x, lens, [False, True, False, True, False], random.Random(3))
        self.assertEqual(tuple(y.shape), (B, N))
        self.assertEqual(tuple(warp.shape), (B,))
        self.assertTrue(bool(((warp >= 0.88) & (warp <= 1.12)).all()))
        for b, L in enumerate(lens):
            self.assertTrue(torch.all(y[b, L:] == 0))
            # rows 1 and 3 had a room already: only noise, 10 dB under the signal's RMS
            if b in (1, 3):
                nz = y[b, :L] - x[b, :L]
                snr = 10 * torch.log10(x[b, :L].pow(2).mean() / nz.pow(2).mean())
                self.assertAlmostEqual(float(snr), 10.0, delta=1.0)
        # the same draws from the same seed; others from another
        y2, _ = ch(x, lens, [False, True, False, True, False], random.Random(3))
        y3, _ = ch(x, lens, [False, True, False, True, False], random.Random(4))
        self.assertTrue(torch.equal(y, y2))
        self.assertFalse(torch.equal(y, y3))

    def test_level(self):
        x = 0.5 * torch.rand(4, 3000) - 0.25
        ch = GpuChannel({"p_rir": 0.0, "p_noise": 0.0, "p_level": 1.0, "level": [-20.0, -20.0], "p_vtlp": 0.0}, 16000, "cpu")
        y, warp = ch(x, [3000] * 4, [False] * 4, random.Random(1))
        self.assertIsNone(warp)
        self.assertTrue(torch.allclose(y.abs().amax(1), torch.full((4,), 0.1), rtol=1e-5))

    def test_pool_features_through_channel(self):
        cfg = load_config(MODEL_YAML)
        with tempfile.TemporaryDirectory() as d:
            write_corpus(d, 13, 5)
            plain = FeaturePool(cfg.frontend, torch.device("cpu"), max_seconds=30.0)
            kept = FeaturePool(cfg.frontend, torch.device("cpu"), max_seconds=30.0, keep_waves=True)
            self.assertEqual(plain.add_manifest(os.path.join(d, "manifest.jsonl")), 13)
            self.assertEqual(kept.add_manifest(os.path.join(d, "manifest.jsonl")), 13)
            rng = random.Random(2)
            shapes = kept.bucket_shapes(60000, 10 ** 9, 3, 96)
            batches, dropped = kept.bucket_batches(rng, 60000, 10 ** 9, 3, 96)
            self.assertEqual(dropped, 0)
            off = GpuChannel(OFF, 16000, "cpu")
            on = GpuChannel({"p_noise": 1.0, "p_vtlp": 1.0}, 16000, "cpu")
            for idx, shape in batches:
                self.assertIn(shape, shapes)
                a = plain.collate_to(idx, shape)
                b = kept.collate_to(idx, shape, off, rng)
                c = kept.collate_to(idx, shape, on, rng)
                for u, v in zip(a[1:], b[1:]):
                    self.assertTrue(torch.equal(u, v))
                # no channel drawn: the pooled features (both fp16; the FFT batch differs)
                self.assertLess(float((a[0] - b[0]).abs().max()), 1e-2)
                # a channel: other features, same frame counts, nothing past each utterance's frames
                for r, i in enumerate(idx):
                    n = kept.feats[i].shape[0]
                    self.assertGreater(float((a[0][r, :n] - c[0][r, :n]).abs().mean()), 0.05)
                    self.assertTrue(torch.all(c[0][r, n:] == 0))


class TestOptState(unittest.TestCase):
    def test_round_trip(self):
        cfg = load_config(MODEL_YAML)
        torch.manual_seed(0)
        m = TrainModel(cfg)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=1e-3)
        for _ in range(3):
            loss = sum((p.float() ** 2).sum() for p in m.parameters())
            opt.zero_grad()
            loss.backward()
            opt.step()
        with tempfile.TemporaryDirectory() as d:
            save_opt(os.path.join(d, "opt.pt"), opt)
            m2 = TrainModel(cfg)
            m2.load_state_dict(m.state_dict())
            opt2 = torch.optim.AdamW(m2.parameters(), lr=5e-4, betas=(0.9, 0.98), weight_decay=1e-3)
            load_opt(os.path.join(d, "opt.pt"), opt2, "cpu")
            self.assertEqual(opt2.param_groups[0]["lr"], 5e-4)        # the trainer's, not the file's
            s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
            self.assertEqual(set(s1), set(s2))
            for k in s1:
                self.assertEqual(float(s1[k]["step"]), float(s2[k]["step"]))
                for n in ("exp_avg", "exp_avg_sq"):
                    self.assertEqual(s2[k][n].dtype, torch.float32)
                    self.assertTrue(torch.allclose(s1[k][n], s2[k][n], rtol=1e-2, atol=1e-30))
            other = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(3))], lr=1e-3)
            other.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]})
            with self.assertRaises(ValueError):
                load_opt(os.path.join(d, "opt.pt"), other, "cpu")


if __name__ == "__main__":
    unittest.main()
