"""rnntd_ref.random_model: presets, determinism, decoding rates near the requested ones, the CLI."""
import contextlib
import io
import os
import shutil
import tempfile
import unittest

import numpy as np
import torch

import refpath  # noqa: F401
from rnntd_ref.io import check_tokens, expected_shapes, load_model
from rnntd_ref.npy import load_npy
from rnntd_ref.random_model import (_DecodeSim, _shares, decode_rates, default_tokens, main, preset_config,
                                    random_features, random_model, target_rates)


def held_out_shares(model, n, seed):
    """Decoding shares on n fresh random utterances of 40 encoder frames (numpy twin of greedy_decode)."""
    rng = np.random.default_rng(seed)
    frames = 40 * model.cfg.subsampling
    feats = np.stack([random_features(model, rng, frames) for _ in range(n)])
    with torch.no_grad():
        f, _ = model.encode_batch(feats, [frames] * n)
    sim = _DecodeSim(model, [x.double() for x in f])
    return _shares(sim.counts(model.joint.out.bias.detach().double().numpy()), model.cfg)


class TestRandomModel(unittest.TestCase):
    def test_presets(self):
        m = preset_config("mlperf")
        self.assertEqual([(l.input, l.hidden, l.time_stack) for l in m.encoder.layers],
                         [(240, 1024, 1), (1024, 1024, 2), (2048, 1024, 1), (1024, 1024, 1), (1024, 1024, 1)])
        self.assertEqual((m.predictor.embedding, [l.hidden for l in m.predictor.layers]), (320, [320, 320]))
        self.assertEqual((m.joint.dim, m.joint.activation, m.vocab_size, m.big_blank_durations, m.max_symbols),
                         (512, "relu", 28, [2, 4, 8], 30))
        self.assertEqual(m.subsampling, 6)
        n_params = sum(int(np.prod(s)) for s in expected_shapes(m).values())
        self.assertEqual(n_params, 45325408 + 160)  # weights of this shape + frontend mean/std
        for p in ("tiny", "small"):
            self.assertEqual(preset_config(p).n_out, preset_config(p).vocab_size + 4)
        self.assertEqual(preset_config("tiny", big_blank_durations=[]).n_out, 10)
        with self.assertRaises(ValueError):
            preset_config("huge")

    def test_tokens(self):
        self.assertEqual(default_tokens(28)[:3], ["\u2581", "'", "a"])
        check_tokens(default_tokens(28), 28)
        check_tokens(default_tokens(100), 100)

    def test_target_rates(self):
        cfg = preset_config("tiny")
        r = target_rates(cfg)
        self.assertEqual(list(r), ["label", "big2", "big4", "big8", "blank"])
        for k, v in {"label": 0.2, "big2": 0.1, "big4": 0.1, "big8": 0.1, "blank": 0.5}.items():
            self.assertAlmostEqual(r[k], v)
        r = target_rates(cfg, 0.3, big_rates=[0.1, 0.2, 0.05])
        self.assertAlmostEqual(r["blank"], 0.35)
        self.assertEqual(target_rates(preset_config("tiny", big_blank_durations=[]), 0.25), {"label": 0.25, "blank": 0.75})
        for bad in (dict(label_rate=0.7, blank_rate=0.5), dict(big_rates=[0.1]), dict(label_rate=0.0)):
            with self.assertRaises(ValueError):
                target_rates(cfg, **bad)

    def test_deterministic(self):
        cfg = preset_config("tiny")
        a, ra = random_model(cfg, seed=4, calib_utts=32)
        b, rb = random_model(cfg, seed=4, calib_utts=32)
        c, _ = random_model(cfg, seed=5, calib_utts=32)
        self.assertEqual(ra, rb)
        for k, v in a.state_dict().items():
            self.assertTrue(torch.equal(v, b.state_dict()[k]), k)
        self.assertFalse(torch.equal(a.state_dict()["encoder.lstm.0.weight_ih"], c.state_dict()["encoder.lstm.0.weight_ih"]))
        # output biases end on a 2^-12 grid
        bias = a.joint.out.bias.detach().double().numpy()
        np.testing.assert_array_equal(bias * 4096, np.round(bias * 4096))

    def test_rates(self):
        for over, rates in (({}, dict(label_rate=0.2, blank_rate=0.5)),
                            (dict(lstm_activation="soft", big_blank_durations=[2, 3]),
                             dict(label_rate=0.3, blank_rate=0.4, big_rates=[0.2, 0.1])),
                            (dict(big_blank_durations=[]), dict(label_rate=0.25))):
            cfg = preset_config("tiny", **over)
            want = target_rates(cfg, **rates)
            model, achieved = random_model(cfg, seed=11, **rates)
            with self.subTest(over=over):
                for g, r in want.items():
                    self.assertLess(abs(achieved[g] - r), 0.02, (g, achieved, want))
                held = held_out_shares(model, 128, seed=99)
                for g, r in want.items():
                    self.assertLess(abs(held[g] - r), 0.08, (g, held, want))

    def test_sim_equals_greedy_decode(self):
        cfg = preset_config("tiny", max_symbols=2)
        model, _ = random_model(cfg, seed=2, label_rate=0.4, calib_utts=16)
        rng = np.random.default_rng(0)
        feats = [random_features(model, rng, t) for t in (0, 3, 17, 40, 81)]
        _, counts = decode_rates(model, feats)
        with torch.no_grad():
            sim = _DecodeSim(model, [model.encode(x)[0].double() for x in feats])
        n_out = sim.counts(model.joint.out.bias.detach().double().numpy())
        want = {g: int(n_out[idx].sum()) for g, idx in {"label": list(range(9)), "big2": [11], "big4": [10],
                                                        "big8": [9], "blank": [12]}.items()}
        self.assertEqual(counts, want)

    def test_cli(self):
        tmp = tempfile.mkdtemp()
        try:
            out = os.path.join(tmp, "m")
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = main(["--preset", "tiny", "--seed", "3", "--out", out, "--big-blanks", "2,5",
                           "--activation", "soft", "--label-rate", "0.3", "--blank-rate", "0.5",
                           "--big-rates", "0.1,0.1", "--samples", "2", "--frames", "30", "--calib-utts", "32"])
            self.assertEqual(rc, 0)
            text = buf.getvalue()
            self.assertIn("target rates:      label=0.300 big2=0.100 big5=0.100 blank=0.500", text)
            self.assertIn("calibration rates:", text)
            self.assertIn("decoded rates:", text)
            m, toks = load_model(out)
            self.assertEqual((m.cfg.lstm_activation, m.cfg.big_blank_durations), ("soft", [2, 5]))
            x = load_npy(os.path.join(out, "samples", "sample001.npy"))
            self.assertEqual((x.shape, x.dtype), ((30, 6), np.float32))
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(main(["--out", out, "--big-blanks", "1"]), 2)
            self.assertIn("big_blank_durations[0]", err.getvalue())
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
