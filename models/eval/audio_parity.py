#!/usr/bin/env python3
"""Audio in = features in: the C engine's transcripts of test-split WAVs (decoded and turned into features by
the engine itself) against its transcripts of the same utterances' .npy features made by features.py (what
every model was trained and evaluated on).

  python3 -m rnntd_eval.audio_parity --model models/en-char-small --engines .corpus/tts-root(.tar.xz) \\
      --text .corpus/text --cli build/engine/rnnt-transcribe --work /tmp/audio-parity --n 60

The utterances are evaluate.py's clean test set (models/corpus/synth.py on test.txt in file order, seed 2000,
no augmentation), the first N of them; test.txt is read from --text, or derived from --text/sources.tsv with
build_text.py's split rule when only that is there. Features: features.py in float32, as evaluate.py writes
them. Both inputs go through one rnnt-transcribe --format json run each (CPU, one thread); the script prints
how many transcripts (and token sequences) are identical, the differing ones, and exits 1 if any differ.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

from rnntd_corpus.build_text import split_of
from rnntd_ref.config import load_config
from rnntd_train.data import read_manifest
from rnntd_train.features import LogMel, read_wav

SYNTH = [sys.executable, "-m", "rnntd_corpus.synth"]     # the corpus package of this installation


def test_sentences(text_dir, work):
    p = os.path.join(text_dir, "test.txt")
    if os.path.exists(p):
        return p
    out = os.path.join(work, "test.txt")
    with open(os.path.join(text_dir, "sources.tsv")) as f, open(out, "w") as o:
        for line in f:
            s = line.rstrip("\n").split("\t")[0]
            if s and split_of(s, 5, 5) == "test":
                o.write(s + "\n")
    return out


def transcribe(cli, model, files):
    p = subprocess.run([cli, "--model", model, "--format", "json", "--backend", "cpu", "--threads", "1"] + files,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("rnnt-transcribe failed: %s" % p.stderr[-800:])
    out = {}
    for line in p.stdout.splitlines():
        o = json.loads(line)
        out[o["file"]] = o
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--engines", required=True)
    ap.add_argument("--text", required=True, help="folder with test.txt (or sources.tsv)")
    ap.add_argument("--cli", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    out = os.path.join(a.work, "test-clean")
    if not os.path.exists(os.path.join(out, "manifest.jsonl")):
        subprocess.run([*SYNTH, "--engines", os.path.abspath(a.engines), "--work", a.work,
                        "--sentences", test_sentences(a.text, a.work), "--out", out, "--seed", "2000",
                        "--count", str(a.n), "--aug", "0", "--in-order", "--jobs", str(a.jobs)], check=True)
    recs = read_manifest(os.path.join(out, "manifest.jsonl"))[:a.n]
    torch.set_num_threads(1)
    lm = LogMel(load_config(os.path.join(a.model, "model.yaml")).frontend)
    feat_dir = os.path.join(a.work, "features")
    os.makedirs(feat_dir, exist_ok=True)
    for r in recs:
        r["npy"] = os.path.join(feat_dir, os.path.basename(r["path"])[:-4] + ".npy")
        if not os.path.exists(r["npy"]):
            x, sr = read_wav(r["path"])
            if sr != lm.fe.sample_rate:
                raise SystemExit("%s: %d Hz, the model wants %d" % (r["path"], sr, lm.fe.sample_rate))
            np.save(r["npy"], lm(torch.from_numpy(x)).numpy().astype(np.float32))
    from_wav = transcribe(a.cli, a.model, [r["path"] for r in recs])
    from_npy = transcribe(a.cli, a.model, [r["npy"] for r in recs])
    same_text = same_tokens = 0
    engines = {}
    for r in recs:
        w, n = from_wav[r["path"]], from_npy[r["npy"]]
        tw, tn = [t["id"] for t in w["tokens"]], [t["id"] for t in n["tokens"]]
        same_text += w["text"] == n["text"]
        same_tokens += tw == tn
        engines[r["engine"]] = engines.get(r["engine"], 0) + 1
        if w["text"] != n["text"] or tw != tn:
            print("DIFFERS %s (%s): wav '%s' / npy '%s' (reference '%s')" % (r["id"], r["engine"], w["text"], n["text"],
                                                                            r["text"]))
    print("%d test-split utterances (%s), %.1f s of audio: %d/%d identical transcripts from WAV and from .npy, "
          "%d/%d identical token sequences" % (len(recs), ", ".join("%s %d" % kv for kv in sorted(engines.items())),
                                               sum(r["duration"] for r in recs), same_text, len(recs), same_tokens,
                                               len(recs)))
    sys.exit(0 if same_tokens == len(recs) else 1)


if __name__ == "__main__":
    main()
