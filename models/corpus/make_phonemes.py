#!/usr/bin/env python3
"""Phonemise a seeded subset of the training sentences for the hibari voice (neural_tts.py), here, so
that only hibari's acoustic model and DSP travel to the GPU machine (its lexicons, tagger and OOV
network stay here: 5.6 MB less to carry).

  PYTHONPATH=.corpus/pysite python3 -m rnntd_corpus.make_phonemes --sentences .corpus/text/train.txt \
      --count 30000 --seed 11 --out .corpus/run/text/hibari.jsonl.xz

Output lines: {"text": normalised sentence, "phonemes": hibari's G2P of it}, in the seeded order.
Sentences whose G2P is empty, or drops a word (fewer phoneme words than text words), are left out:
the audio must say every word of its label.
"""
import argparse
import json
import lzma
import random
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", required=True)
    ap.add_argument("--count", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from hibari.g2p import G2P
    g2p = G2P()
    opener = lzma.open if a.sentences.endswith(".xz") else open
    with opener(a.sentences, "rt") as f:
        sentences = [s.strip() for s in f if s.strip()]
    random.Random(a.seed).shuffle(sentences)
    kept = dropped = 0
    with lzma.open(a.out, "wt") as out:
        for s in sentences:
            if kept >= a.count:
                break
            ps = g2p(s)
            if not ps or len(ps.split()) < len(s.split()):
                dropped += 1
                continue
            out.write(json.dumps({"text": s, "phonemes": ps}, ensure_ascii=False) + "\n")
            kept += 1
    print("make_phonemes.py: %d sentences kept, %d dropped -> %s" % (kept, dropped, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
