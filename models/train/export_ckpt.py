#!/usr/bin/env python3
"""Export a train.py checkpoint (ckpt.pt: fp32 weights + counters) as a model directory, as the end of
train.py does (F16 weights, model.yaml, tokens.txt). A larger model's piece returns its ckpt.pt split in
parts (device-chain.sh): join them first (`cat ckpt.pt.part? > ckpt.pt`).

    python3 -m rnntd_train.export_ckpt --model models/train/en-char-medium.yaml --name en-char-medium \\
        ckpt.pt OUT_DIR
"""
import argparse

import torch

from rnntd_ref.config import load_config
from rnntd_ref.io import export_state_dict

from .data import TOKENS
from .model import TrainModel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model.yaml of the architecture the checkpoint was trained with")
    ap.add_argument("--name", required=True, help="the exported model's name")
    ap.add_argument("--dtype", default="F16", choices=["F16", "F32"])
    ap.add_argument("ckpt")
    ap.add_argument("out")
    a = ap.parse_args()
    cfg = load_config(a.model)
    ck = torch.load(a.ckpt, map_location="cpu", weights_only=False)
    m = TrainModel(cfg)
    m.load_state_dict(ck["model"])
    sd = {k: v.detach().float().cpu() for k, v in m.state_dict().items()}
    cfg.name = a.name
    export_state_dict(cfg, sd, TOKENS, a.out, dtype=a.dtype)
    print("%s: step %d, pieces %s -> %s (%s)" % (a.ckpt, ck["step"], ck.get("pieces"), a.out, a.dtype))


if __name__ == "__main__":
    main()
