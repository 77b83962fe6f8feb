"""The committed golden files (tests/data/golden): regenerating them gives the same bytes, they follow the
schema the C tests read, and they agree with themselves (the logits' argmaxes are the decoded tokens)."""
import os
import shutil
import tempfile
import unittest

import numpy as np
import torch

import refpath
from rnntd_ref.golden import CASES, generate
from rnntd_ref.io import load_model
from rnntd_ref.npy import load_npy
from rnntd_ref.safetensors_io import read_safetensors

GOLDEN = refpath.GOLDEN


def files_under(root):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(out)


def f32_ulps(a, b):
    """Distance in float32 units in the last place, elementwise (same-sign finite values)."""
    ia = np.asarray(a, np.float32).view(np.int32).astype(np.int64)
    ib = np.asarray(b, np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return np.abs(ia - ib)


class TestGoldenRegeneration(unittest.TestCase):
    def test_regenerated_bytes_equal_committed(self):
        tmp = tempfile.mkdtemp()
        try:
            generate(tmp, log=lambda s: None)
            self.assertEqual(files_under(tmp), files_under(GOLDEN))
            for rel in files_under(GOLDEN):
                new = open(os.path.join(tmp, rel), "rb").read()
                old = open(os.path.join(GOLDEN, rel), "rb").read()
                if new == old:
                    continue
                # Everything is generated from integer-exact inputs (seeded PCG64 draws rounded to float32,
                # biases on a 2^-12 grid), so only the float64 arithmetic of another BLAS or libm could
                # move a stored value, and then by one float32 rounding at most.
                self.assertTrue(rel.endswith("golden.safetensors"), f"{rel} differs from the committed bytes")
                a, ma = read_safetensors(os.path.join(tmp, rel))
                b, mb = read_safetensors(os.path.join(GOLDEN, rel))
                self.assertEqual(ma, mb)
                self.assertEqual(sorted(a), sorted(b))
                for k in a:
                    self.assertEqual((a[k].dtype, a[k].shape), (b[k].dtype, b[k].shape), k)
                    if a[k].dtype == np.float32:
                        self.assertLessEqual(int(f32_ulps(a[k], b[k]).max(initial=0)), 2, f"{rel}: {k}")
                    else:
                        np.testing.assert_array_equal(a[k], b[k], f"{rel}: {k}")
                print(f"note: {rel} differs from the committed bytes by at most 2 float32 ulps")
        finally:
            shutil.rmtree(tmp)


class TestGoldenContents(unittest.TestCase):
    def test_small(self):
        total = sum(os.path.getsize(os.path.join(GOLDEN, f)) for f in files_under(GOLDEN))
        self.assertLess(total, 700_000)

    def test_cases(self):
        names = sorted(c.name for c in CASES)
        self.assertEqual(sorted(d for d in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, d))), names)
        self.assertGreaterEqual(len(names), 4)
        seen = {"hard": 0, "soft": 0, "big": 0, "plain": 0, "time_stack": 0, "cap": 0, "dtypes": set()}
        for case in CASES:
            with self.subTest(case=case.name):
                seen["dtypes"] |= {self.check_case(case, seen)}
        self.assertTrue(all(v for k, v in seen.items() if k != "dtypes"), seen)
        self.assertEqual(seen["dtypes"], {"F32", "F16", "BF16"})

    def check_case(self, case, seen):
        d = os.path.join(GOLDEN, case.name)
        model, tokens = load_model(d, dtype=torch.float64)
        cfg = model.cfg
        raw = open(os.path.join(d, "weights.safetensors"), "rb").read(4096)
        dtype = "BF16" if b'"BF16"' in raw else "F16" if b'"F16"' in raw else "F32"
        self.assertEqual(dtype, case.dtype)
        g, meta = read_safetensors(os.path.join(d, "golden.safetensors"))
        self.assertEqual(meta, {"n_utts": str(len(case.lengths))})
        V, n_out = cfg.vocab_size, cfg.n_out
        seen["hard" if cfg.lstm_activation == "hard" else "soft"] += 1
        seen["big" if cfg.big_blank_durations else "plain"] += 1
        seen["time_stack"] += any(l.time_stack > 1 for l in cfg.encoder.layers)
        lengths = []
        for b in range(len(case.lengths)):
            u = lambda k: g[f"utt{b}.{k}"]  # noqa: E731
            x = u("features")
            T = x.shape[0]
            lengths.append(T)
            np.testing.assert_array_equal(load_npy(os.path.join(d, f"utt{b}.npy")), x)
            T_enc = cfg.encoder_frames(T)
            self.assertEqual(u("frontend").shape, (-(-T // cfg.frame_stacking), cfg.feature_dim * cfg.frame_stacking))
            t_l = u("frontend").shape[0]
            for l, layer in enumerate(cfg.encoder.layers):
                self.assertEqual(u(f"encoder.layer{l}").shape, (t_l, layer.out))
                t_l = -(-t_l // layer.time_stack)
            self.assertNotIn(f"utt{b}.encoder.layer{len(cfg.encoder.layers)}", g)
            self.assertEqual(u("encoder").shape, (T_enc, cfg.encoder_hidden))
            tok, frm = u("tokens"), u("frames")
            self.assertEqual((tok.dtype, frm.dtype, u("joint.tu").dtype), (np.int32,) * 3)
            U = len(tok)
            self.assertEqual(frm.shape, (U,))
            self.assertTrue(((tok >= 0) & (tok < V)).all())
            self.assertTrue((np.diff(frm) >= 0).all() and ((frm >= 0) & (frm < max(T_enc, 1))).all())
            self.assertEqual(u("predictor").shape, (U + 1, cfg.predictor_hidden))
            tu, logits = u("joint.tu"), u("joint.logits")
            self.assertEqual(logits.shape, (len(tu), n_out))
            self.assertEqual(tu.shape, (len(tu), 2))
            if T_enc == 0:
                self.assertEqual(len(tu), 0)
            per_frame = {}
            for t in frm.tolist():
                per_frame[t] = per_frame.get(t, 0) + 1
            seen["cap"] += any(c == cfg.max_symbols for c in per_frame.values())
            # each stored row's argmax is what the decoder did at (t, u): a label emitted there, or a move
            for (t, uu), z in zip(tu.tolist(), logits):
                k = int(np.argmax(z))
                self.assertTrue(0 <= t < T_enc and 0 <= uu <= U)
                if k < V:
                    self.assertEqual((int(tok[uu]), int(frm[uu])), (k, t))
                elif uu < U:
                    self.assertGreater(int(frm[uu]), t)
            # spot check against the reference, from the stored model and input
            with torch.no_grad():
                f, _ = model.encode(torch.from_numpy(x.astype(np.float64)))
            np.testing.assert_allclose(u("encoder"), f.numpy(), rtol=1e-6, atol=1e-7)
        self.assertIn(0, lengths)
        self.assertIn(1, lengths)
        self.assertTrue(any(t % 2 for t in lengths))
        self.assertTrue(any(t % cfg.frame_stacking for t in lengths) or cfg.frame_stacking == 1)
        self.assertTrue(any(55 <= t <= 70 for t in lengths))
        return dtype


if __name__ == "__main__":
    unittest.main()
