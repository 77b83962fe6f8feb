"""rnntd_ref.model: activations, the LSTM against torch.nn.LSTM, stacking, names, batched = one by one."""
import unittest

import numpy as np
import torch
import torch.nn.functional as F

import refpath  # noqa: F401
from rnntd_ref.io import expected_shapes
from rnntd_ref.model import RNNTModel, LSTMLayer, hard_sigmoid, hard_tanh, lstm_cell, stack_frames
from rnntd_ref.random_model import build_config, random_features, randomize_


def tiny_cfg(act="hard", normalize="global", durations=(2, 4)):
    return build_config(name="t", feature_dim=5, frame_stacking=3, encoder_hidden=[11, 9, 7], time_stacks=[2, 3, 1],
                        embedding=6, predictor_hidden=[10, 8], joint_dim=13, vocab_size=6,
                        big_blank_durations=list(durations), max_symbols=3, lstm_activation=act, normalize=normalize)


class TestActivations(unittest.TestCase):
    EDGES = [-np.inf, -1e30, -3.0001, -3.0, -2.9999, -1.0001, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.0001, 2.9999,
             3.0, 3.0001, 1e30, np.inf]

    def test_edges_equal_pytorch(self):
        for dt in (torch.float32, torch.float64):
            x = torch.tensor(self.EDGES, dtype=dt)
            # FORMAT.md's x/6 + 1/2 against PyTorch's (x + 3)/6: one rounding apart at most
            torch.testing.assert_close(hard_sigmoid(x), F.hardsigmoid(x), rtol=0, atol=2.0 ** -24)
            torch.testing.assert_close(hard_tanh(x), F.hardtanh(x), rtol=0, atol=0)
            # exact at the points that define them
            x = torch.tensor([-np.inf, -1e30, -3.0, 0.0, 3.0, 1e30, np.inf], dtype=dt)
            self.assertEqual(hard_sigmoid(x).tolist(), [0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 1.0])
            self.assertEqual(hard_sigmoid(x).tolist(), F.hardsigmoid(x).tolist())
            x = torch.tensor([-np.inf, -1e30, -1.0, -0.5, 0.0, 0.5, 1.0, 1e30, np.inf], dtype=dt)
            self.assertEqual(hard_tanh(x).tolist(), [-1.0, -1.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.0, 1.0])

    def test_nan_propagates(self):
        x = torch.tensor([float("nan")])
        self.assertTrue(torch.isnan(hard_sigmoid(x)).all() and torch.isnan(hard_tanh(x)).all())
        self.assertTrue(torch.isnan(F.hardtanh(x)).all())

    def test_random_values_within_one_rounding(self):
        # FORMAT.md's x/6 + 1/2 and PyTorch's (x + 3)/6 may differ by one rounding in float32
        g = torch.Generator().manual_seed(0)
        x = torch.randn(100000, generator=g) * 4
        d = (hard_sigmoid(x) - F.hardsigmoid(x)).abs()
        self.assertLessEqual(float(d.max()), 2 ** -23)
        torch.testing.assert_close(hard_tanh(x), F.hardtanh(x), rtol=0, atol=0)
        xd = x.double()
        self.assertLessEqual(float((hard_sigmoid(xd) - F.hardsigmoid(xd)).abs().max()), 1e-15)

    def test_cell_formula(self):
        H = 3
        a = torch.tensor([-4.0, 0.3, 2.0, 3.5, -0.2, 0.0, -1.5, 0.7, 1.2, 6.0, -3.0, 0.1], dtype=torch.float64)
        c = torch.tensor([0.5, -2.0, 0.25], dtype=torch.float64)
        h2, c2 = lstm_cell(a, c, "hard")
        hs = lambda v: min(max(v / 6 + 0.5, 0.0), 1.0)  # noqa: E731
        ht = lambda v: min(max(v, -1.0), 1.0)  # noqa: E731
        for j in range(H):
            i, f, g, o = hs(a[j]), hs(a[H + j]), ht(a[2 * H + j]), hs(a[3 * H + j])
            cc = f * float(c[j]) + i * g
            self.assertAlmostEqual(float(c2[j]), cc, places=14)
            self.assertAlmostEqual(float(h2[j]), o * ht(cc), places=14)


class TestLSTM(unittest.TestCase):
    def test_soft_equals_torch_nn_lstm(self):
        torch.manual_seed(0)
        ref = torch.nn.LSTM(7, 9, num_layers=2).double()
        layers = [LSTMLayer(7, 9, "soft").double(), LSTMLayer(9, 9, "soft").double()]
        with torch.no_grad():
            for l, layer in enumerate(layers):
                for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(layer, n).copy_(getattr(ref, f"{n}_l{l}"))
        x = torch.randn(13, 7, dtype=torch.float64)
        want, _ = ref(x.unsqueeze(1))
        got = layers[1](layers[0](x))
        torch.testing.assert_close(got, want.squeeze(1), rtol=1e-12, atol=1e-12)
        # the step interface gives the same
        st = [layer.zero_state(like=x) for layer in layers]
        for t in range(13):
            y = x[t]
            for l, layer in enumerate(layers):
                st[l] = layer.step(y, st[l])
                y = st[l][0]
            torch.testing.assert_close(y, want[t, 0], rtol=1e-12, atol=1e-12)

    def test_empty_sequence(self):
        layer = LSTMLayer(4, 3, "hard")
        self.assertEqual(tuple(layer(torch.zeros(0, 4)).shape), (0, 3))
        self.assertEqual(tuple(layer(torch.zeros(2, 0, 4)).shape), (2, 0, 3))


class TestModel(unittest.TestCase):
    def setUp(self):
        self.cfg = tiny_cfg()
        self.rng = np.random.default_rng(1)
        self.m = randomize_(RNNTModel(self.cfg), self.rng).double().eval()

    def test_stack_frames(self):
        x = torch.arange(10.0).reshape(5, 2)
        y = stack_frames(x, 2)
        self.assertEqual(y.tolist(), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 0]])
        self.assertIs(stack_frames(x, 1), x)
        self.assertEqual(tuple(stack_frames(torch.zeros(0, 3), 4).shape), (0, 12))

    def test_state_dict_names_are_the_format(self):
        sd = self.m.state_dict()
        shapes = expected_shapes(self.cfg)
        self.assertEqual(set(sd), set(shapes))
        for k, v in sd.items():
            self.assertEqual(tuple(v.shape), shapes[k], k)
        m2 = RNNTModel(tiny_cfg(normalize="none"))
        self.assertNotIn("frontend.mean", m2.state_dict())
        self.assertIn("joint.out.bias", m2.state_dict())

    def test_frontend(self):
        x = torch.from_numpy(random_features(self.m, self.rng, 7)).double()
        y = self.m.frontend(x)
        self.assertEqual(tuple(y.shape), (3, 15))
        norm = (x - self.m.frontend.mean) / self.m.frontend.std
        torch.testing.assert_close(y[0], norm[0:3].reshape(-1))
        torch.testing.assert_close(y[2, :5], norm[6])
        self.assertTrue(bool((y[2, 5:] == 0).all()))

    def test_encode_shapes(self):
        for T in (0, 1, 5, 17, 18, 19, 40):
            x = random_features(self.m, self.rng, T)
            f, layers = self.m.encode(x)
            self.assertEqual(f.dtype, torch.float64)
            self.assertEqual(tuple(f.shape), (self.cfg.encoder_frames(T), 7), T)
            T1 = -(-T // 3)
            self.assertEqual([tuple(l.shape) for l in layers], [(T1, 11), (-(-T1 // 2), 9), (f.shape[0], 7)])

    def test_predictor_forward_equals_steps(self):
        labels = torch.tensor([[3, 0, 5, 5, 1]])
        g_all = self.m.predictor(labels)[0]
        g, st = self.m.predictor_init()
        torch.testing.assert_close(g_all[0], g)
        for u, k in enumerate(labels[0].tolist()):
            g, st = self.m.predictor_step(k, st)
            torch.testing.assert_close(g_all[u + 1], g)
        with self.assertRaises(ValueError):
            self.m.predictor_step(self.cfg.vocab_size, st)  # the start symbol is not a label

    def test_batched_equals_one_by_one(self):
        lengths = [0, 1, 7, 19, 30]
        T = max(lengths)
        xs = [random_features(self.m, self.rng, t) for t in lengths]
        feats = np.full((len(xs), T, 5), 1e3, dtype=np.float32)  # padding must not leak
        for b, x in enumerate(xs):
            feats[b, :len(x)] = x
        labels = torch.tensor(self.rng.integers(0, 6, size=(len(xs), 4)))
        logits, enc_lens = self.m.forward_logits(feats, lengths, labels)
        self.assertEqual(enc_lens.tolist(), [self.cfg.encoder_frames(t) for t in lengths])
        for b, x in enumerate(xs):
            f, _ = self.m.encode(x)
            g = self.m.predictor(labels[b:b + 1])[0]
            want = self.m.joint(f.unsqueeze(1), g.unsqueeze(0))
            torch.testing.assert_close(logits[b, :f.shape[0]], want, rtol=1e-12, atol=1e-12)

    def test_joint(self):
        f = torch.randn(4, 7, dtype=torch.float64)
        g = torch.randn(8, dtype=torch.float64)
        z = self.m.joint(f, g)
        j = self.m.joint
        want = torch.relu(f @ j.enc.weight.t() + j.enc.bias + g @ j.pred.weight.t() + j.pred.bias) @ j.out.weight.t() + j.out.bias
        torch.testing.assert_close(z, want)
        self.assertEqual(z.shape[-1], self.cfg.vocab_size + 2 + 1)

    def test_float32_and_float64(self):
        m32 = randomize_(RNNTModel(self.cfg), np.random.default_rng(1)).eval()
        x = random_features(m32, self.rng, 25)
        f32, _ = m32.encode(x)
        f64, _ = m32.double().encode(x)
        self.assertEqual(f32.dtype, torch.float32)
        torch.testing.assert_close(f32.double(), f64, rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
