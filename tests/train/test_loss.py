"""The multi-blank RNN-T loss against a brute-force sum over every alignment, and against torchaudio."""
import unittest

import torch

from rnntd_train import loss as loss_mod
from rnntd_train.loss import brute_force_loglik, multiblank_rnnt_loglik, multiblank_rnnt_loss


def case(seed, B, T, U, V, durations, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    K = V + len(durations) + 1
    logits = torch.randn(B, T, U + 1, K, generator=g, dtype=dtype) * 2
    labels = torch.randint(0, V, (B, U), generator=g)
    Tl = torch.randint(1, T + 1, (B,), generator=g)
    Tl[0] = T
    Ul = torch.randint(0, U + 1, (B,), generator=g)
    Ul[0] = U
    return logits, labels, Tl, Ul


class TestMultiblankLoss(unittest.TestCase):
    def check_brute(self, seed, B, T, U, V, durations, sigma):
        logits, labels, Tl, Ul = case(seed, B, T, U, V, durations)
        ll = multiblank_rnnt_loglik(logits, labels, Tl, Ul, durations, sigma)
        for b in range(B):
            ref = brute_force_loglik(logits[b], labels[b], int(Tl[b]), int(Ul[b]), durations, sigma)
            self.assertAlmostEqual(float(ll[b]), float(ref), places=9,
                                   msg="b=%d T=%d U=%d d=%s" % (b, Tl[b], Ul[b], durations))

    def test_brute_force_plain(self):
        self.check_brute(1, 4, 5, 3, 4, (), 0.0)

    def test_brute_force_big_blanks(self):
        self.check_brute(2, 5, 8, 3, 4, (2, 4), 0.0)

    def test_brute_force_big_blanks_sigma(self):
        self.check_brute(3, 5, 9, 2, 3, (2, 4, 8), 0.05)

    def test_brute_force_empty_labels_and_short(self):
        logits, labels, _, _ = case(4, 3, 7, 2, 3, (2, 4, 8))
        Tl, Ul = torch.tensor([1, 2, 7]), torch.tensor([0, 0, 2])
        ll = multiblank_rnnt_loglik(logits, labels, Tl, Ul, (2, 4, 8), 0.05)
        for b in range(3):
            ref = brute_force_loglik(logits[b], labels[b], int(Tl[b]), int(Ul[b]), (2, 4, 8), 0.05)
            self.assertAlmostEqual(float(ll[b]), float(ref), places=9)

    def test_sigma_is_per_step(self):
        # With one alignment only (T=1, U=1: label then blank) sigma costs exactly 2 sigma.
        logits, labels, _, _ = case(5, 1, 1, 1, 3, (2,))
        a = multiblank_rnnt_loglik(logits, labels, torch.tensor([1]), torch.tensor([1]), (2,), 0.0)
        b = multiblank_rnnt_loglik(logits, labels, torch.tensor([1]), torch.tensor([1]), (2,), 0.05)
        self.assertAlmostEqual(float(a - b), 0.1, places=12)

    def test_gradients_finite_and_match_numeric(self):
        logits, labels, Tl, Ul = case(6, 2, 6, 3, 4, (2, 4))
        logits.requires_grad_(True)
        f = lambda x: multiblank_rnnt_loss(x, labels, Tl, Ul, (2, 4), 0.05, reduction="sum")  # noqa: E731
        self.assertTrue(torch.autograd.gradcheck(f, (logits,), eps=1e-6, atol=1e-5))
        loss = f(logits)
        loss.backward()
        self.assertTrue(bool(torch.isfinite(logits.grad).all()))

    def both_paths(self, logits, labels, Tl, Ul, durations, sigma):
        """(loss, grad) through the hand-written backward and through autograd on the alpha loop."""
        out = []
        saved = loss_mod.USE_LATTICE_FN
        try:
            for fn in (True, False):
                loss_mod.USE_LATTICE_FN = fn
                x = logits.clone().requires_grad_(True)
                w = torch.linspace(0.5, 1.5, logits.shape[0], dtype=logits.dtype)   # unequal upstream grads
                ll = multiblank_rnnt_loglik(x, labels, Tl, Ul, durations, sigma)
                (ll * w).sum().backward()
                out.append((ll.detach(), x.grad))
        finally:
            loss_mod.USE_LATTICE_FN = saved
        return out

    def test_handwritten_backward_matches_autograd(self):
        for seed, B, T, U, V, durs, sigma in [(11, 1, 1, 0, 3, (), 0.0), (12, 1, 7, 4, 5, (2, 4, 8), 0.05),
                                              (13, 3, 9, 5, 4, (2, 4), 0.0), (14, 5, 13, 6, 6, (2, 4, 8), 0.05),
                                              (15, 7, 20, 3, 28, (3,), 0.1), (16, 4, 6, 9, 5, (2, 4, 8), 0.05)]:
            with self.subTest(seed=seed, B=B, T=T, U=U, durations=durs):
                logits, labels, Tl, Ul = case(seed, B, T, U, V, durs)
                (ll1, g1), (ll0, g0) = self.both_paths(logits, labels, Tl, Ul, durs, sigma)
                torch.testing.assert_close(ll1, ll0, rtol=0, atol=0)          # same forward code
                err = ((g1 - g0).norm() / g0.norm()).item()
                self.assertLess(err, 1e-12)
                # padding past an utterance's end gets no gradient
                for b in range(B):
                    self.assertEqual(float(g1[b, int(Tl[b]):].abs().sum()), 0.0)
                    self.assertEqual(float(g1[b, :, int(Ul[b]) + 1:].abs().sum()), 0.0)

    def test_handwritten_backward_gradcheck(self):
        logits, labels, Tl, Ul = case(17, 3, 7, 3, 4, (2, 4))
        logits.requires_grad_(True)
        saved = loss_mod.USE_LATTICE_FN
        loss_mod.USE_LATTICE_FN = True
        try:
            f = lambda x: multiblank_rnnt_loss(x, labels, Tl, Ul, (2, 4), 0.05, reduction="mean")  # noqa: E731
            self.assertTrue(torch.autograd.gradcheck(f, (logits,), eps=1e-6, atol=1e-5))
        finally:
            loss_mod.USE_LATTICE_FN = saved

    def test_float32_large_gradients_finite(self):
        logits, labels, Tl, Ul = case(7, 3, 40, 20, 28, (2, 4, 8), dtype=torch.float32)
        logits = (logits * 10).requires_grad_(True)
        loss = multiblank_rnnt_loss(logits, labels, Tl, Ul, (2, 4, 8), 0.05)
        loss.backward()
        self.assertTrue(bool(torch.isfinite(loss)))
        self.assertTrue(bool(torch.isfinite(logits.grad).all()))

    def test_against_torchaudio_without_big_blanks(self):
        try:
            import torchaudio.functional as taf
        except Exception:  # noqa: BLE001
            self.skipTest("torchaudio is not installed here")
        logits, labels, Tl, Ul = case(8, 4, 12, 5, 6, (), dtype=torch.float32)
        ours = multiblank_rnnt_loss(logits, labels, Tl, Ul, (), 0.0, reduction="none")
        ref = taf.rnnt_loss(logits, labels.int(), Tl.int(), Ul.int(), blank=logits.shape[-1] - 1,
                            reduction="none")
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)
        # gradients too
        x1 = logits.clone().requires_grad_(True)
        x2 = logits.clone().requires_grad_(True)
        multiblank_rnnt_loss(x1, labels, Tl, Ul, (), 0.0, reduction="sum").backward()
        taf.rnnt_loss(x2, labels.int(), Tl.int(), Ul.int(), blank=logits.shape[-1] - 1,
                      reduction="sum").backward()
        torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-3, atol=1e-4)


if __name__ == "__main__":
    unittest.main()
