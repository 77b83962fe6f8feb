#!/usr/bin/env python3
"""The decode loop's time with big blanks on and off, on real features, through the C engine's CLI.

  python3 -m rnntd_eval.bigblank_speed --model models/en-char-small --cli build-train/engine/rnnt-transcribe \
      --reps 3 .corpus/eval/npy-test-unseen/*.npy

"Off" is a copy of the model whose big-blank output biases are -65504 (the F16 minimum; as
tests/bench/bench_engine.c does with -1e30): the same weights, the same encoder work, only the greedy
loop can no longer skip. Runs `rnnt-transcribe --threads 1 --batch 1 --timing` on the files, on and off
alternately, `--reps` times each, and prints the medians of the encoder and of the decode loop
(predictor + joint + the greedy loop's own time, as --timing splits them) and the ratio. Skipping saves
joint evaluations only: the predictor runs once per emitted label, big blanks or not.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile

from rnntd_ref.config import load_config
from rnntd_ref.safetensors_io import read_safetensors, write_safetensors

TIMING = re.compile(r"encoder ([0-9.]+), predictor ([0-9.]+), joint ([0-9.]+), decode ([0-9.]+) s")


def without_big_blanks(model, dest):
    cfg = load_config(os.path.join(model, "model.yaml"))
    V, n = cfg.vocab_size, len(cfg.big_blank_durations)
    for f in ("model.yaml", "tokens.txt"):
        shutil.copy(os.path.join(model, f), dest)
    tensors, meta = read_safetensors(os.path.join(model, "weights.safetensors"))
    b = tensors["joint.out.bias"].copy()
    b[V:V + n] = -65504.0
    tensors["joint.out.bias"] = b
    write_safetensors(os.path.join(dest, "weights.safetensors"), tensors, meta, float_dtype="F32")


def timed(cli, model, files):
    p = subprocess.run([cli, "--model", model, "--threads", "1", "--batch", "1", "--backend", "cpu", "--timing"]
                       + files, capture_output=True, text=True, check=True)
    m = TIMING.search(p.stderr)
    if not m:
        raise RuntimeError("no timing line in: " + p.stderr[-300:])
    enc, pred, joint, dec = (float(x) for x in m.groups())
    return enc, pred + joint + dec, pred, joint


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as off:
        without_big_blanks(a.model, off)
        runs = {"on": [], "off": []}
        for _ in range(a.reps):
            runs["on"].append(timed(a.cli, a.model, a.files))
            runs["off"].append(timed(a.cli, off, a.files))
    med = {k: [statistics.median(r[i] for r in v) for i in range(4)] for k, v in runs.items()}
    print("%d files, %s, 1 thread, batch 1, median of %d" % (len(a.files), a.model, a.reps))
    print("| big blanks | encoder s | decode loop s (predictor + joint + loop) | predictor s | joint s |")
    print("|---|---|---|---|---|")
    for k in ("on", "off"):
        print("| %s | %.3f | %.3f | %.3f | %.3f |" % (k, med[k][0], med[k][1], med[k][2], med[k][3]))
    print("decode loop speed-up with big blanks: %.2fx" % (med["off"][1] / max(med["on"][1], 1e-9)))


if __name__ == "__main__":
    main()
