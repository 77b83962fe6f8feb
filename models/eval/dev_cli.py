#!/usr/bin/env python3
"""Dev WER of model directories with the C engine: the figure models are chosen on (issue 15: model
selection on dev only). The dev set is the 300 utterances train.py synthesises (dev.txt, seed 1000, the
full engine set); their fp32 log-mel features are written once as .npy (evaluate.py's write_features),
then each model is decoded with `rnnt-transcribe` (one thread, CPU). Prints, per model, one JSON line:
dev WER, the share of encoder frames big blanks skipped, and WER per engine and clean/augmented.

    python3 -m rnntd_eval.dev_cli --cli build/engine/rnnt-transcribe --dev /work/model-corpus/dev \\
        --features /work/model-corpus/dev-npy models/en-char-small CANDIDATE_DIR ...
(the features depend on the frontend only, which every en-char-* model shares)
"""
import argparse
import json
import os

from rnntd_ref.config import load_config
from rnntd_train.data import read_manifest
from rnntd_train.features import LogMel

from .evaluate import cli_decode, rates, write_features


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--dev", required=True, help="the synthesised dev set (manifest.jsonl and its WAVs)")
    ap.add_argument("--features", required=True, help="where the .npy features are (written if missing)")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    recs = read_manifest(os.path.join(a.dev, "manifest.jsonl"))
    write_features(LogMel(load_config(os.path.join(a.models[0], "model.yaml")).frontend), recs, a.features)
    for d in a.models:
        cli_decode(a.cli, d, recs)
        r = rates(recs, "c_hyp")
        skipped = sum(x["c_skipped"] for x in recs) / max(sum(x["c_enc_frames"] for x in recs), 1)
        by = {}
        for x in recs:
            for k in (x["engine"], "aug" if x["aug"] else "clean"):
                by.setdefault(k, []).append(x)
        print(d, json.dumps({"dev_wer": round(r["wer"], 4), "dev_cer": round(r["cer"], 4), "skip": round(skipped, 4),
                             **{k: round(rates(v, "c_hyp")["wer"], 4) for k, v in sorted(by.items())}}), flush=True)


if __name__ == "__main__":
    main()
