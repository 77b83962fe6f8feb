"""export_ckpt.py (a larger model's piece returns only ckpt.pt; the model directory is made here) writes
the checkpoint's weights: F32 bit for bit, F16 as their rounding; ckpt_from_model.py reads them back."""
import os
import subprocess
import sys
import tempfile
import unittest

import torch

from rnntd_ref.config import load_config
from rnntd_ref.io import load_model
from rnntd_train.model import TrainModel

HERE = os.path.dirname(os.path.abspath(__file__))
MEDIUM = os.path.join(HERE, "..", "..", "models", "train", "en-char-medium.yaml")


def run(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)


class TestExportCkpt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cfg = load_config(MEDIUM)
        torch.manual_seed(3)
        m = TrainModel(cls.cfg)
        with torch.no_grad():
            m.frontend.mean.uniform_(-1, 1)
            m.frontend.std.uniform_(0.5, 2)
        cls.sd = {k: v.detach().float() for k, v in m.state_dict().items()}
        cls.ckpt = os.path.join(cls.tmp.name, "ckpt.pt")
        torch.save({"model": cls.sd, "step": 8332, "pieces": [101, 102, 103]}, cls.ckpt)   # as train.save_ckpt

    def roundtrip(self, dtype):
        out = os.path.join(self.tmp.name, "m-" + dtype)
        p = run("rnntd_train.export_ckpt", "--model", MEDIUM, "--name", "en-char-medium", "--dtype", dtype,
                self.ckpt, out)
        self.assertEqual(p.returncode, 0, p.stderr)
        ref, tokens = load_model(out)
        self.assertEqual(ref.cfg.name, "en-char-medium")
        self.assertEqual([l.hidden for l in ref.cfg.encoder.layers], [512] * 5)
        self.assertEqual(len(tokens), 28)
        back = os.path.join(self.tmp.name, "back-%s.pt" % dtype)
        p = run("rnntd_train.ckpt_from_model", out, "--step", "8332", "--pieces", "101", "102", "103", "--out", back)
        self.assertEqual(p.returncode, 0, p.stderr)
        sd = torch.load(back, map_location="cpu")["model"]
        self.assertEqual(sorted(sd), sorted(self.sd))
        return sd

    def test_f32_exact(self):
        sd = self.roundtrip("F32")
        for k, v in self.sd.items():
            self.assertTrue(torch.equal(sd[k].float(), v), k)

    def test_f16_rounding(self):
        sd = self.roundtrip("F16")
        rounded = 0
        for k, v in self.sd.items():
            got = sd[k].float()
            self.assertTrue(torch.equal(got, v.half().float()), k)
            rounded += not torch.equal(got, v)
        self.assertGreater(rounded, len(self.sd) // 2)     # F16 was written, not F32

    def test_other_architecture_refused(self):
        small = os.path.join(HERE, "..", "..", "models", "train", "en-char-small.yaml")
        p = run("rnntd_train.export_ckpt", "--model", small, "--name", "x", self.ckpt,
                os.path.join(self.tmp.name, "wrong"))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("size mismatch", p.stderr)


if __name__ == "__main__":
    unittest.main()
