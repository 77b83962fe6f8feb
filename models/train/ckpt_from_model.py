#!/usr/bin/env python3
"""Make a training checkpoint (train.py --resume) from an exported model directory.

The checkpoint of a piece lives only on the GPU machine and in the folder it was fetched to; when it
is lost, training continues from the shipped model instead. The weights were exported as F16, so the
resumed model differs from the lost checkpoint by that rounding only (relative 2^-11 per weight).

  python3 -m rnntd_train.ckpt_from_model models/en-char-small --step 17500 --pieces 1 2 3 4 5 6 9 11 12 --out .corpus/model-helper/ckpt.pt

--step and --pieces restore the counters the model card gives (the learning-rate schedule and the
start of SpecAugment depend on the step; the data seeds already used are kept for the record).
Weights that an F16 export gave are stored as F16 (exactly the same values, half the bytes to carry to
the GPU machine; train.py's load_state_dict converts them back to fp32).
"""
import argparse
import os

import torch

from rnntd_ref.io import load_model

from .model import TrainModel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--step", type=int, required=True)
    ap.add_argument("--pieces", type=int, nargs="+", required=True, help="data seeds of the pieces so far")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    ref, _ = load_model(a.model_dir)
    model = TrainModel(ref.cfg)
    model.load_state_dict(ref.state_dict(), strict=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    sd = {}
    for k, v in model.state_dict().items():
        v = v.detach().float().cpu()
        half = v.half()
        sd[k] = half if torch.equal(half.float(), v) else v     # F16 only where it is exact
    torch.save({"model": sd, "step": a.step, "pieces": list(a.pieces), "from_model": os.path.abspath(a.model_dir)},
               a.out)
    print(f"{a.out}: step {a.step}, pieces {a.pieces}, from {a.model_dir}")


if __name__ == "__main__":
    main()
