#!/usr/bin/env python3
"""Transcripts of one set of feature files by several backends (rnnt-transcribe outputs, "path<TAB>text"
per line), against each other and against the references: how many utterances each backend gives
exactly as the first one does, and each one's WER (models/train/data.py's error_rates, as evaluate.py).

    parity_cli.py MANIFEST.jsonl NAME=OUTPUT.txt [NAME=OUTPUT.txt ...]

Needs the models package (rnntd_train; models/README.md): here the checkout's .venv/bin/python, on the
GPU machine after `python3 -m pip install -q --no-deps --no-build-isolation --no-index -e models`.

MANIFEST.jsonl: the evaluation set's manifest (models/eval/evaluate.py): "id" and "text" per utterance;
a feature file's name without ".npy" is its id. Exit status 1 when an output lacks an utterance."""
import json
import os
import sys

from rnntd_train.data import error_rates


def read_output(path):
    out = {}
    with open(path) as f:
        for line in f:
            name, _, text = line.rstrip("\n").partition("\t")
            out[os.path.splitext(os.path.basename(name))[0]] = text
    return out


def main():
    refs = {}
    with open(sys.argv[1]) as f:
        for line in f:
            r = json.loads(line)
            refs[r["id"]] = r["text"]
    runs = [arg.split("=", 1) for arg in sys.argv[2:]]
    outs = [(name, read_output(path)) for name, path in runs]
    ids = sorted(outs[0][1])
    base = outs[0][1]
    status = 0
    for name, out in outs:
        missing = [i for i in ids if i not in out]
        if missing:
            print("%s: %d utterances missing (first %s)" % (name, len(missing), missing[0]))
            status = 1
            continue
        same = sum(out[i] == base[i] for i in ids)
        wer, _, we, wn, _, _ = error_rates([(refs[i], out[i]) for i in ids])
        print("%-16s %d/%d transcripts identical to %s's (%.1f%%), WER %.2f%% (%d/%d words)"
              % (name, same, len(ids), outs[0][0], 100.0 * same / len(ids), 100.0 * wer, we, wn))
    return status


if __name__ == "__main__":
    sys.exit(main())
