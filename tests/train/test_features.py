"""The log-mel frontend (models/train/features.py) against a plain numpy loop and torchaudio."""
import dataclasses
import math
import os
import unittest

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
from rnntd_ref.config import FrontendConfig
from rnntd_train.features import LogMel, mel_filterbank, warp_spectrum

FE = FrontendConfig(preemphasis=0.97, dither=0.0, window="hann", win_length=400, hop_length=160, n_fft=512,
                    center=False, power=2.0, n_mels=80, f_min=0.0, f_max=8000.0, mel_scale="slaney",
                    mel_norm="slaney", log_floor=1e-10, normalize="global")


def slaney_mel(f):
    return f * 3 / 200 if f < 1000 else 15 + math.log(f / 1000) / (math.log(6.4) / 27)


class TestFeatures(unittest.TestCase):
    def test_against_numpy_loop(self):
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(4000) * 0.1).astype(np.float64)
        feats = LogMel(FE, dtype=torch.float64)(torch.from_numpy(x)).numpy()
        self.assertEqual(feats.shape, (1 + (4000 - 400) // 160, 80))
        y = np.concatenate([[x[0]], x[1:] - 0.97 * x[:-1]])
        n = np.arange(400)
        w = 0.5 - 0.5 * np.cos(2 * np.pi * n / 399)            # symmetric Hann
        fb = mel_filterbank(512, 16000, 80, 0.0, 8000.0)
        for i in (0, 7, feats.shape[0] - 1):
            fr = y[i * 160:i * 160 + 400] * w
            spec = np.abs(np.fft.rfft(fr, 512)) ** 2
            ref = np.log(np.maximum(spec @ fb, 1e-10))
            np.testing.assert_allclose(feats[i], ref, rtol=1e-9, atol=1e-9)

    def test_filterbank_shape_and_centres(self):
        fb = mel_filterbank(512, 16000, 80, 0.0, 8000.0)
        self.assertEqual(fb.shape, (257, 80))
        freqs = np.linspace(0, 8000, 257)
        peaks = freqs[fb.argmax(axis=0)]
        mels = [slaney_mel(f) for f in peaks]
        self.assertTrue(all(b > a for a, b in zip(mels, mels[1:])), "filters are in increasing order")
        self.assertTrue((fb >= 0).all())

    def test_batch_equals_single_and_masks(self):
        rng = np.random.default_rng(1)
        a = torch.from_numpy(rng.standard_normal(3000).astype(np.float32) * 0.1)
        b = torch.from_numpy(rng.standard_normal(1700).astype(np.float32) * 0.1)
        lm = LogMel(FE)
        wav = torch.zeros(3, 3000)
        wav[0] = a
        wav[1, :1700] = b
        feats, nf = lm.batch(wav, torch.tensor([3000, 1700, 100]))
        self.assertEqual(nf.tolist(), [lm.n_frames(3000), lm.n_frames(1700), 0])
        torch.testing.assert_close(feats[0], lm(a))
        torch.testing.assert_close(feats[1, :nf[1]], lm(b))
        self.assertEqual(float(feats[1, nf[1]:].abs().sum()), 0.0)
        self.assertEqual(lm(torch.zeros(399)).shape, (0, 80))

    def test_deterministic(self):
        x = torch.randn(8000) * 0.1
        lm = LogMel(FE)
        self.assertTrue(torch.equal(lm(x), lm(x)))

    def test_against_torchaudio(self):
        try:
            import torchaudio
        except Exception:  # noqa: BLE001
            self.skipTest("torchaudio is not installed here")
        # torchaudio (center=False) frames n_fft samples and centres the window in them: its frame i is
        # our frame of the samples from i*hop + (n_fft - win)/2; its frame count is 1 + (N - n_fft)//hop.
        y = torch.randn(1, 16000, dtype=torch.float64) * 0.1
        ms = torchaudio.transforms.MelSpectrogram(
            sample_rate=16000, n_fft=512, win_length=400, hop_length=160, f_min=0.0, f_max=8000.0, n_mels=80,
            window_fn=lambda n, **kw: torch.hann_window(n, periodic=False, **kw), power=2.0, center=False,
            norm="slaney", mel_scale="slaney").double()
        ref = torch.clamp(ms(y)[0].t(), min=1e-10).log()
        ours = LogMel(dataclasses.replace(FE, preemphasis=0.0), dtype=torch.float64)(y[0, 56:])
        self.assertEqual(ref.shape[0], 97)
        # torchaudio builds its filterbank in float32: agreement to ~1e-6 relative is all it can give
        torch.testing.assert_close(ours[:97], ref, rtol=1e-4, atol=1e-4)


class TestVTLP(unittest.TestCase):
    def test_warp_moves_a_peak_by_the_factor(self):
        K = 257
        spec = torch.zeros(3, 4, K, dtype=torch.float64)
        spec[:, :, 100] = 1.0
        out = warp_spectrum(spec, torch.tensor([1.0, 1.1, 0.9], dtype=torch.float64))
        torch.testing.assert_close(out[0], spec[0])                          # 1.0: unchanged
        self.assertEqual(int(out[1, 0].argmax()), 110)                       # f -> 1.1 f
        self.assertIn(int(out[2, 0].argmax()), (89, 90))                     # f -> 0.9 f
        self.assertTrue(torch.equal(out[1, 0], out[1, 3]))                   # the same warp in every frame

    def test_logmel_batch_with_warp(self):
        fe = type("FE", (), dict(center=False, window="hann", win_length=400, hop_length=160, n_fft=512,
                                 sample_rate=16000, n_mels=80, f_min=0.0, f_max=8000.0, mel_scale="slaney",
                                 mel_norm="slaney", preemphasis=0.97, dither=0.0, power=2.0, log_floor=1e-10))
        lm = LogMel(fe)
        t = torch.arange(16000) / 16000.0
        x = torch.stack([torch.sin(2 * math.pi * 1000 * t)] * 2).float() * 0.5
        f, _ = lm.batch(x, torch.tensor([16000, 16000]), warp=torch.tensor([1.0, 1.2]))
        f0, _ = lm.batch(x, torch.tensor([16000, 16000]))
        torch.testing.assert_close(f[0], f0[0])
        self.assertGreater(int(f[1, 10].argmax()), int(f0[1, 10].argmax()))   # the tone moved up


if __name__ == "__main__":
    unittest.main()
