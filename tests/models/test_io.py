"""rnntd_ref.io: model directories round trip, the loader's checks, export from nn.LSTM-style state dicts."""
import os
import re
import shutil
import tempfile
import unittest

import numpy as np
import torch

import refpath  # noqa: F401
from rnntd_ref.io import export_state_dict, load_model, read_tokens, save_model
from rnntd_ref.random_model import build_config, default_tokens, random_features, randomize_
from rnntd_ref.model import RNNTModel
from rnntd_ref.safetensors_io import read_safetensors, write_safetensors


def cfg_for(act="hard", normalize="global"):
    return build_config(name="io-test", feature_dim=6, frame_stacking=2, encoder_hidden=[10, 10], time_stacks=[1, 1],
                        embedding=5, predictor_hidden=[9], joint_dim=8, vocab_size=7, big_blank_durations=[2, 4],
                        max_symbols=3, lstm_activation=act, normalize=normalize)


class TestModelDir(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.dir = os.path.join(self.tmp, "m")
        self.cfg = cfg_for()
        self.model = randomize_(RNNTModel(self.cfg), np.random.default_rng(0)).eval()
        self.tokens = default_tokens(7)
        save_model(self.model, self.tokens, self.dir)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_round_trip(self):
        self.assertEqual(sorted(os.listdir(self.dir)), ["model.yaml", "tokens.txt", "weights.safetensors"])
        m, toks = load_model(self.dir)
        self.assertEqual(toks, self.tokens)
        self.assertEqual(m.cfg, self.cfg)
        for k, v in self.model.state_dict().items():
            self.assertTrue(torch.equal(m.state_dict()[k], v), k)
        self.assertEqual(open(os.path.join(self.dir, "tokens.txt"), encoding="utf-8").read(),
                         "\u2581\n'\na\nb\nc\nd\ne\n")
        m64, _ = load_model(self.dir, dtype=torch.float64)
        self.assertEqual(m64.dtype, torch.float64)

    def test_half_precision_files(self):
        x = random_features(self.model, np.random.default_rng(1), 20)
        want, _ = self.model.encode(x)
        for dt, tol in (("F16", 2e-3), ("BF16", 2e-2)):
            d = os.path.join(self.tmp, dt)
            save_model(self.model, self.tokens, d, dtype=dt)
            self.assertLess(os.path.getsize(os.path.join(d, "weights.safetensors")),
                            os.path.getsize(os.path.join(self.dir, "weights.safetensors")) * 0.6)
            m, _ = load_model(d)
            got, _ = m.encode(x)
            torch.testing.assert_close(got, want, rtol=tol, atol=tol)

    def rewrite_weights(self, change):
        path = os.path.join(self.dir, "weights.safetensors")
        t, meta = read_safetensors(path)
        change(t)
        write_safetensors(path, t, meta)

    def assertLoadFails(self, pattern):
        with self.assertRaises(ValueError) as cm:
            load_model(self.dir)
        self.assertRegex(str(cm.exception), pattern)

    def test_bad_weights(self):
        cases = [
            (lambda t: t.pop("joint.out.bias"), r"missing tensor 'joint.out.bias'"),
            (lambda t: t.__setitem__("extra", np.zeros(1, np.float32)), r"unexpected tensor 'extra'"),
            (lambda t: t.__setitem__("encoder.lstm.0.weight_hh", np.zeros((40, 9), np.float32)),
             r"'encoder.lstm.0.weight_hh' has shape \[40, 9\], expected \[40, 10\]"),
            (lambda t: t["predictor.embedding"].__setitem__((3, 1), np.nan), r"'predictor.embedding' has non-finite"),
            (lambda t: t["joint.enc.weight"].__setitem__((0, 0), np.inf), r"'joint.enc.weight' has non-finite"),
            (lambda t: t["frontend.std"].__setitem__(2, 0.0), r"'frontend.std' has entries <= 0"),
            (lambda t: t.__setitem__("joint.out.bias", np.zeros(10, np.int32)), r"expected a float type"),
        ]
        good = open(os.path.join(self.dir, "weights.safetensors"), "rb").read()
        for change, pattern in cases:
            with self.subTest(pattern=pattern):
                self.rewrite_weights(change)
                self.assertLoadFails(pattern)
                open(os.path.join(self.dir, "weights.safetensors"), "wb").write(good)
        load_model(self.dir)

    def test_bad_tokens(self):
        path = os.path.join(self.dir, "tokens.txt")
        cases = [
            ("a\nb\nc\n", r"3 tokens, vocab_size is 7"),
            ("a\nb\nc\nd\ne\nf\ng\nh\n", r"8 tokens"),
            ("a\nb\r\nc\nd\ne\nf\ng\n", r"tokens.txt:2: carriage return"),
            ("a\nb\nc\n\ne\nf\ng\n", r"tokens.txt:4: empty token"),
            ("a\nb\nc\nd\ne\nf\ng\n\n", r"8 tokens"),
            ("a\nb\nc\na\ne\nf\ng\n", r"tokens.txt:4: token 'a' duplicates line 1"),
            ("a\nb\tx\nc\nd\ne\nf\ng\n", r"tokens.txt:2: token contains a control character"),
            ("a\n" + "x" * 65 + "\nc\nd\ne\nf\ng\n", r"tokens.txt:2: token longer than 64 bytes"),
            ("a\n \nc\nd\ne\nf\ng\n", r"tokens.txt:2: token contains a space"),
            ("a\nb c\nc\nd\ne\nf\ng\n", r"tokens.txt:2: token contains a space"),
            ("a\nb\x7f\nc\nd\ne\nf\ng\n", r"tokens.txt:2: token contains a control character"),
        ]
        for text, pattern in cases:
            with self.subTest(text=text):
                open(path, "w", encoding="utf-8", newline="").write(text)
                self.assertLoadFails(pattern)
        open(path, "wb").write(b"a\nb\n\xff\nd\ne\nf\ng\n")
        self.assertLoadFails(r"not UTF-8")
        # a final newline is optional; 64 bytes of UTF-8 is the limit, not 64 characters
        open(path, "w", encoding="utf-8").write("a\nb\nc\nd\ne\nf\n" + "\u00e9" * 32)
        self.assertEqual(read_tokens(path, 7)[-1], "\u00e9" * 32)
        open(path, "w", encoding="utf-8").write("a\nb\nc\nd\ne\nf\n" + "\u00e9" * 33)
        self.assertLoadFails("longer than 64 bytes")

    def test_bad_yaml_is_reported_with_position(self):
        path = os.path.join(self.dir, "model.yaml")
        text = open(path).read().replace("max_symbols: 3", "max_symbols: 3\nbogus: 1")
        open(path, "w").write(text)
        self.assertLoadFails(r"model\.yaml:\d+:1: bogus: unknown key")

    def test_save_rejects_bad_models(self):
        with self.assertRaisesRegex(ValueError, "5 tokens"):
            save_model(self.model, self.tokens[:5], os.path.join(self.tmp, "x"))
        with torch.no_grad():
            self.model.joint.out.bias[0] = float("nan")
        with self.assertRaisesRegex(ValueError, "non-finite"):
            save_model(self.model, self.tokens, os.path.join(self.tmp, "x"))


class TestExport(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_nn_lstm_names_equal_direct(self):
        cfg = cfg_for()
        model = randomize_(RNNTModel(cfg), np.random.default_rng(5))
        save_model(model, default_tokens(7), os.path.join(self.tmp, "direct"))
        renamed = {}
        for k, v in model.state_dict().items():
            m = re.match(r"^(encoder|predictor)\.lstm\.(\d+)\.(\w+)$", k)
            renamed[f"{m.group(1)}.lstm.{m.group(3)}_l{m.group(2)}" if m else k] = v
        self.assertIn("encoder.lstm.weight_ih_l1", renamed)
        renamed["predictor.embedding.weight"] = renamed.pop("predictor.embedding")
        export_state_dict(cfg, renamed, default_tokens(7), os.path.join(self.tmp, "renamed"))
        for f in ("model.yaml", "weights.safetensors", "tokens.txt"):
            self.assertEqual(open(os.path.join(self.tmp, "direct", f), "rb").read(),
                             open(os.path.join(self.tmp, "renamed", f), "rb").read(), f)
        export_state_dict(cfg, model.state_dict(), default_tokens(7), os.path.join(self.tmp, "ours"))
        self.assertEqual(open(os.path.join(self.tmp, "direct", "weights.safetensors"), "rb").read(),
                         open(os.path.join(self.tmp, "ours", "weights.safetensors"), "rb").read())

    def test_real_torch_modules(self):
        """A soft model built from torch.nn.LSTM / nn.Embedding / nn.Linear exports to the same numbers."""
        torch.manual_seed(0)
        cfg = cfg_for(act="soft", normalize="none")
        enc = torch.nn.LSTM(12, 10, num_layers=2)
        pred = torch.nn.LSTM(5, 9, num_layers=1)
        emb = torch.nn.Embedding(8, 5)
        lin = {"enc": torch.nn.Linear(10, 8), "pred": torch.nn.Linear(9, 8), "out": torch.nn.Linear(8, 10)}
        sd = {f"encoder.lstm.{k}": v for k, v in enc.state_dict().items()}
        sd.update({f"predictor.lstm.{k}": v for k, v in pred.state_dict().items()})
        sd["predictor.embedding.weight"] = emb.weight
        for n, l in lin.items():
            sd[f"joint.{n}.weight"], sd[f"joint.{n}.bias"] = l.weight, l.bias
        d = os.path.join(self.tmp, "torch")
        export_state_dict(cfg, sd, default_tokens(7), d)
        m, _ = load_model(d, dtype=torch.float64)
        x = torch.randn(15, 6, dtype=torch.float64)
        f, _ = m.encode(x)
        with torch.no_grad():
            x1 = torch.cat([x, x.new_zeros(1, 6)]).reshape(8, 1, 12)  # stacking by 2, zero padded
            want, _ = enc.double()(x1)
            torch.testing.assert_close(f, want[:, 0], rtol=1e-6, atol=1e-6)
            g, _ = m.predictor_step(3, m.predictor_init()[1])
            h = torch.zeros(1, 1, 9, dtype=torch.float64)
            c = torch.zeros_like(h)
            pred = pred.double()
            _, (h, c) = pred(emb.weight.double()[7].reshape(1, 1, 5), (h, c))
            y, _ = pred(emb.weight.double()[3].reshape(1, 1, 5), (h, c))
            torch.testing.assert_close(g, y[0, 0], rtol=1e-6, atol=1e-6)

    def test_export_rejects(self):
        cfg = cfg_for()
        sd = RNNTModel(cfg).state_dict()
        bad = dict(sd)
        bad["encoder.lstm.weight_ih_l0_reverse"] = sd["encoder.lstm.0.weight_ih"]
        with self.assertRaisesRegex(ValueError, "bidirectional"):
            export_state_dict(cfg, bad, default_tokens(7), os.path.join(self.tmp, "x"))
        bad = dict(sd)
        bad["encoder.lstm.weight_ih_l0"] = sd["encoder.lstm.0.weight_ih"]
        with self.assertRaisesRegex(ValueError, "twice"):
            export_state_dict(cfg, bad, default_tokens(7), os.path.join(self.tmp, "x"))
        bad = dict(sd)
        del bad["predictor.lstm.0.bias_hh"]
        with self.assertRaisesRegex(ValueError, "missing tensor 'predictor.lstm.0.bias_hh'"):
            export_state_dict(cfg, bad, default_tokens(7), os.path.join(self.tmp, "x"))


if __name__ == "__main__":
    unittest.main()
