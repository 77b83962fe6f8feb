"""The shipped model (models/en-char-small) decodes its samples as samples.tsv says, through the
PyTorch reference; and the sample features are the frontend's output for the sample WAVs."""
import csv
import os
import sys
import unittest

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
from rnntd_ref.decode import detokenize, greedy_decode
from rnntd_ref.io import load_model
from rnntd_train.features import LogMel, read_wav

MODEL = os.path.join(ROOT, "models", "en-char-small")
SAMPLES = os.path.join(MODEL, "samples")


@unittest.skipUnless(os.path.exists(os.path.join(MODEL, "weights.safetensors")), "no shipped model")
class TestShippedModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model, cls.tokens = load_model(MODEL)
        with open(os.path.join(SAMPLES, "samples.tsv"), newline="") as f:
            cls.rows = list(csv.DictReader(f, delimiter="\t"))

    def test_samples_decode_as_listed(self):
        self.assertGreaterEqual(len(self.rows), 3)
        exact = 0
        for r in self.rows:
            feats = np.load(os.path.join(SAMPLES, r["file"] + ".npy"))
            self.assertEqual(feats.dtype, np.float32)
            toks, _ = greedy_decode(self.model, torch.from_numpy(feats))
            self.assertEqual(detokenize(toks, self.tokens), r["model_output"], r["file"])
            exact += r["model_output"] == r["reference"]
        self.assertGreaterEqual(exact, 3, "the quick-start samples should be transcribed correctly")

    def test_sample_features_come_from_the_wavs(self):
        lm = LogMel(self.model.cfg.frontend)
        for r in self.rows:
            x, sr = read_wav(os.path.join(SAMPLES, r["file"] + ".wav"))
            self.assertEqual(sr, 16000)
            ref = np.load(os.path.join(SAMPLES, r["file"] + ".npy"))
            ours = lm(torch.from_numpy(x)).numpy()
            self.assertEqual(ours.shape, ref.shape)
            np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4)

    def test_checkpoint_from_the_model(self):
        """ckpt_from_model.py: a checkpoint train.py resumes from, with the model's exact weights."""
        import subprocess
        import tempfile
        from rnntd_train.model import TrainModel
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "ckpt.pt")
            subprocess.run([sys.executable, "-m", "rnntd_train.ckpt_from_model", MODEL,
                            "--step", "9183", "--pieces", "1", "2", "3", "4", "5", "6", "--out", out], check=True, capture_output=True)
            ck = torch.load(out)
        self.assertEqual((ck["step"], ck["pieces"]), (9183, [1, 2, 3, 4, 5, 6]))
        self.assertEqual({v.dtype for v in ck["model"].values()}, {torch.float16})   # F16 export: exact
        tm = TrainModel(self.model.cfg)
        tm.load_state_dict(ck["model"])                                             # as train.py --resume
        for k, v in self.model.state_dict().items():
            self.assertTrue(torch.equal(tm.state_dict()[k], v), k)


if __name__ == "__main__":
    unittest.main()
