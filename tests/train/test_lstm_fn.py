"""The hand-written LSTM layer backward (models/train/lstm_fn.py) against autograd through the plain loop."""
import unittest

import torch

from rnntd_train import model as train_model
from rnntd_train.lstm_fn import hard_lstm_seq


def loop_layer(layer, x):
    """The plain autograd loop of HardLSTM, whatever USE_SEQ_FN says."""
    saved = train_model.USE_SEQ_FN
    train_model.USE_SEQ_FN = False
    try:
        return layer(x)
    finally:
        train_model.USE_SEQ_FN = saved


def rel_err(a, b):
    return ((a - b).norm() / b.norm().clamp(min=1e-300)).item()


class TestHardLSTMSeq(unittest.TestCase):
    def case(self, B, T, I, H, seed, scale=2.0, mixed=True):
        g = torch.Generator().manual_seed(seed)
        layer = train_model.HardLSTM(I, H, "hard").double()
        with torch.no_grad():
            for p in layer.parameters():
                p.copy_((torch.rand(p.shape, generator=g, dtype=torch.float64) * 2 - 1) * scale)
        x = torch.randn(B, T, I, generator=g, dtype=torch.float64)
        dy = torch.randn(B, T, H, generator=g, dtype=torch.float64)

        def run(fn):
            layer.zero_grad()
            xx = x.clone().requires_grad_(True)
            y = fn(xx)
            (y * dy).sum().backward()
            return y.detach(), xx.grad, [p.grad.clone() for p in layer.parameters()]

        saved = train_model.USE_SEQ_FN
        train_model.USE_SEQ_FN = True
        try:
            y1, dx1, dp1 = run(layer)
        finally:
            train_model.USE_SEQ_FN = saved
        y0, dx0, dp0 = run(lambda xx: loop_layer(layer, xx))
        self.assertEqual(tuple(y1.shape), (B, T, H))
        self.assertLess(rel_err(y1, y0), 1e-12)
        self.assertLess(rel_err(dx1, dx0), 1e-12)
        for name, a, b in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), dp1, dp0):
            self.assertLess(rel_err(a, b), 1e-12, name)
        # The case exercised both the linear and the saturated pieces of every activation.
        with torch.no_grad():
            xw = torch.nn.functional.linear(x, layer.weight_ih, layer.bias_ih + layer.bias_hh)
            sat = (xw.abs() > 3).double().mean().item()
        if mixed and B * T * H >= 50:
            self.assertGreater(sat, 0.05)
            self.assertLess(sat, 0.95)
        return dp1

    def test_awkward_sizes(self):
        for B, T, I, H, seed in [(1, 1, 3, 2, 0), (1, 9, 4, 5, 1), (3, 7, 6, 4, 2), (5, 13, 3, 7, 3),
                                 (9, 31, 5, 6, 4)]:
            with self.subTest(B=B, T=T, H=H):
                self.case(B, T, I, H, seed)

    def test_mostly_linear_and_mostly_saturated(self):
        self.case(4, 11, 5, 6, 5, scale=0.3, mixed=False)    # every gate on its linear piece
        self.case(4, 11, 5, 6, 6, scale=8.0, mixed=False)    # nearly every gate saturated

    def test_gradcheck(self):
        g = torch.Generator().manual_seed(7)
        xw = (torch.randn(2, 5, 12, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
        whh = (torch.randn(12, 3, generator=g, dtype=torch.float64)).requires_grad_(True)
        self.assertTrue(torch.autograd.gradcheck(hard_lstm_seq, (xw, whh), eps=1e-7, atol=1e-6))

    def test_zero_steps(self):
        xw = torch.zeros(3, 0, 8, dtype=torch.float64, requires_grad=True)
        whh = torch.ones(8, 2, dtype=torch.float64, requires_grad=True)
        y = hard_lstm_seq(xw, whh)
        self.assertEqual(tuple(y.shape), (3, 0, 2))
        y.sum().backward()
        self.assertEqual(float(whh.grad.abs().sum()), 0.0)


if __name__ == "__main__":
    unittest.main()
