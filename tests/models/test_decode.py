"""rnntd_ref.decode: FORMAT.md stage 6 on a fake model whose joint outputs the test scripts."""
import types
import unittest

import numpy as np
import torch

import refpath  # noqa: F401
from rnntd_ref.decode import NumericError, detokenize, greedy_decode, greedy_decode_encoded
from rnntd_ref.random_model import build_config, random_features, random_model


class FakeModel:
    """Encoder frame t is the row [t]; the predictor output after u labels is [u]; each joint call returns
    the next scripted logits (an int k: 1.0 at k, 0 elsewhere; or a full vector) and logs (t, u)."""

    def __init__(self, V, durations, max_symbols, T_enc, script):
        self.cfg = types.SimpleNamespace(vocab_size=V, big_blank_durations=list(durations), max_symbols=max_symbols)
        self.n_out = V + len(durations) + 1
        self.T_enc = T_enc
        self.script = list(script)
        self.calls = []        # (t, u) of every joint evaluation
        self.fed = []          # labels fed to the predictor

    def encode(self, x):
        return torch.arange(self.T_enc, dtype=torch.float64).reshape(-1, 1), []

    def predictor_init(self):
        return torch.tensor([0.0], dtype=torch.float64), 0

    def predictor_step(self, k, state):
        self.fed.append(k)
        return torch.tensor([state + 1.0], dtype=torch.float64), state + 1

    def joint(self, f, g):
        self.calls.append((int(f[0]), int(g[0])))
        if not self.script:
            raise AssertionError(f"joint called more often than scripted, at (t, u) = {self.calls[-1]}")
        k = self.script.pop(0)
        if isinstance(k, int):
            z = torch.zeros(self.n_out, dtype=torch.float64)
            z[k] = 1.0
            return z
        return torch.tensor(k, dtype=torch.float64)


V = 4  # labels 0..3; durations [2, 4, 8] -> index 4 skips 8, 5 skips 4, 6 skips 2, 7 is the blank
SKIP8, SKIP4, SKIP2, BLANK = 4, 5, 6, 7


def run(script, T_enc, durations=(2, 4, 8), max_symbols=3):
    m = FakeModel(V, durations, max_symbols, T_enc, script)
    tokens, frames = greedy_decode(m, None)
    assert not m.script, f"unused script entries {m.script}"
    return tokens, frames, m


class TestGreedyDecode(unittest.TestCase):
    def test_empty_input(self):
        tokens, frames, m = run([], T_enc=0)
        self.assertEqual((tokens, frames, m.calls, m.fed), ([], [], [], []))

    def test_one_frame(self):
        self.assertEqual(run([BLANK], T_enc=1)[:2], ([], []))
        tokens, frames, m = run([2, 0, BLANK], T_enc=1)
        self.assertEqual((tokens, frames), ([2, 0], [0, 0]))
        self.assertEqual(m.calls, [(0, 0), (0, 1), (0, 2)])
        # a big blank on the only frame ends the utterance
        self.assertEqual(run([SKIP2], T_enc=1)[:2], ([], []))

    def test_labels_keep_the_frame_blank_moves_one(self):
        tokens, frames, m = run([1, BLANK, 3, 2, BLANK, BLANK], T_enc=3)
        self.assertEqual((tokens, frames), ([1, 3, 2], [0, 1, 1]))
        self.assertEqual(m.calls, [(0, 0), (0, 1), (1, 1), (1, 2), (1, 3), (2, 3)])
        self.assertEqual(m.fed, [1, 3, 2])  # the predictor advances on labels only

    def test_big_blank_durations_in_nemo_order(self):
        tokens, frames, m = run([SKIP2, 1, SKIP4, SKIP8], T_enc=10)
        self.assertEqual(m.calls, [(0, 0), (2, 0), (2, 1), (6, 1)])
        self.assertEqual((tokens, frames), ([1], [2]))
        # other duration lists: index V + n - 1 - i skips durations[i]
        _, _, m = run([4, 5, 6], T_enc=9, durations=(3, 5))  # 4 skips 5, 5 skips 3, 6 is the blank
        self.assertEqual([t for t, _ in m.calls], [0, 5, 8])

    def test_big_blank_at_the_last_frame_and_skip_past_the_end(self):
        _, _, m = run([BLANK, BLANK, SKIP2], T_enc=3)           # t = 2 + 2 > T_enc: done
        self.assertEqual([t for t, _ in m.calls], [0, 1, 2])
        _, _, m = run([0, SKIP8], T_enc=5)                     # skip from frame 0 to 8 > 5
        self.assertEqual(m.calls, [(0, 0), (0, 1)])
        _, _, m = run([SKIP4, SKIP4], T_enc=5)                 # lands on 4 (< 5), then 8
        self.assertEqual([t for t, _ in m.calls], [0, 4])
        _, _, m = run([SKIP4], T_enc=4)                        # lands exactly on T_enc: done
        self.assertEqual(len(m.calls), 1)

    def test_max_symbols_cap(self):
        tokens, frames, m = run([1, 1, 1, BLANK, 3, 3], T_enc=3, max_symbols=2)
        # frame 0: two labels hit the cap, forced to frame 1; frame 1: label, blank; frame 2: cap, done
        self.assertEqual(tokens, [1, 1, 1, 3, 3])
        self.assertEqual(frames, [0, 0, 1, 2, 2])
        self.assertEqual(m.calls, [(0, 0), (0, 1), (1, 2), (1, 3), (2, 3), (2, 4)])

    def test_cap_counter_resets(self):
        # a big blank and a blank reset the per-frame count; max_symbols = 1 forces a move after each label
        tokens, frames, _ = run([0, 1, SKIP2, 2], T_enc=5, max_symbols=1)
        self.assertEqual((tokens, frames), ([0, 1, 2], [0, 1, 4]))
        tokens, frames, _ = run([0, BLANK, 0, 0, 0, BLANK], T_enc=3, max_symbols=3)
        self.assertEqual(frames, [0, 1, 1, 1])

    def test_ties_go_to_the_lowest_index(self):
        n = V + 3 + 1
        tokens, _, _ = run([[1.0] * n, BLANK], T_enc=1)
        self.assertEqual(tokens, [0])
        z = [0.0] * n
        z[2] = z[BLANK] = 5.0
        self.assertEqual(run([z, BLANK], T_enc=1)[0], [2])
        z = [0.0] * n
        z[SKIP8] = z[SKIP2] = z[BLANK] = 5.0                   # the longest skip is the lowest index
        self.assertEqual(run([z], T_enc=8)[2].calls, [(0, 0)])

    def test_non_finite_logits_fail(self):
        n = V + 3 + 1
        for bad in (float("nan"), float("inf"), -float("inf")):
            z = [0.0] * n
            z[5] = bad
            m = FakeModel(V, (2, 4, 8), 3, 4, [BLANK, z])
            with self.assertRaisesRegex(NumericError, "non-finite joint output at frame 1"):
                greedy_decode(m, None)

    def test_plain_rnnt(self):
        tokens, frames, m = run([3, 3, 4, 4], T_enc=2, durations=())  # 4 is the blank
        self.assertEqual((tokens, frames), ([3, 3], [0, 0]))

    def test_on_step_sees_every_evaluation(self):
        m = FakeModel(V, (2, 4, 8), 3, 3, [1, SKIP2, BLANK])
        seen = []
        greedy_decode_encoded(m, m.encode(None)[0], on_step=lambda t, u, z, k: seen.append((t, u, k)))
        self.assertEqual(seen, [(0, 0, 1), (0, 1, SKIP2), (2, 1, BLANK)])

    def test_real_model_is_deterministic_and_consistent(self):
        cfg = build_config(name="t", feature_dim=4, frame_stacking=2, encoder_hidden=[9], embedding=5,
                           predictor_hidden=[7], joint_dim=6, vocab_size=5, big_blank_durations=[2, 3], max_symbols=2)
        model, _ = random_model(cfg, seed=3, label_rate=0.4, calib_utts=16)
        x = random_features(model, np.random.default_rng(0), 41)
        steps = []
        tokens, frames = greedy_decode(model, x, on_step=lambda t, u, z, k: steps.append((t, u, k)))
        self.assertEqual((tokens, frames), greedy_decode(model, x))
        self.assertEqual([k for _, _, k in steps if k < 5], tokens)
        self.assertEqual(sorted(frames), frames)
        self.assertTrue(all(0 <= f < cfg.encoder_frames(41) for f in frames))


class TestDetokenize(unittest.TestCase):
    def test_rules(self):
        toks = ["\u2581", "'", "a", "b", "\u2581c", "d\u2581"]
        self.assertEqual(detokenize([], toks), "")
        self.assertEqual(detokenize([0, 2, 3, 0, 0, 4, 5, 0], toks), "ab cd")
        self.assertEqual(detokenize([2, 5, 3], toks), "ad b")
        self.assertEqual(detokenize([2, 1, 3], toks), "a'b")
        self.assertEqual(detokenize([0, 0], toks), "")
        self.assertEqual(detokenize([4, 4], toks), "c c")


if __name__ == "__main__":
    unittest.main()
