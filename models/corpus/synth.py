#!/usr/bin/env python3
"""Synthesise a labelled speech corpus: 16 kHz mono 16-bit WAVs + a JSONL manifest.

  synth.py --engines .corpus/tts-root.tar.xz --sentences .corpus/text/train.txt \
           --out /tmp/corpus/train --seed 1 --count 20000 [--jobs 16] [--aug 0.5] [--start 0]

Each utterance i (of the sentence list taken in a seeded random order, or in file order with
--in-order) gets a voice (espeak-ng / flite / festival), a rate, a pitch and, with probability --aug,
an augmentation chain (speed or tempo, reverb, band-limit, additive noise), all drawn from a random
generator seeded by (seed, i): the same seed gives the same specs, sox runs with -R (repeatable), and
the espeak-ng variants with random breath noise are not used, so the audio is the same too.
Manifest lines: {"id", "path", "duration", "text", "engine", "voice", "rate", "pitch", "aug"}.
The engines run from the relocatable root built by build_engines.sh, through its own loader.
Python stdlib only.
"""
import argparse
import json
import lzma
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import wave
from concurrent.futures import ProcessPoolExecutor

ESPEAK_LANGS = ["en-us", "en", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-us-nyc"]
ESPEAK_VARIANTS = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "f1", "f4", "klatt", "klatt2",
                   "klatt3", "linda", "steph", "paul", "john", "robert"]
FLITE_VOICES = {"kal16": (95, 125), "awb": (90, 130), "rms": (90, 125), "slt": (150, 210)}
FESTIVAL_VOICES = ["kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts"]
# Share of utterances per engine: espeak-ng is the least natural, never dominant.
ENGINE_WEIGHTS = [("flite", 0.40), ("festival", 0.35), ("espeak", 0.25)]


class Engines:
    """Paths and environment for running the programs of an unpacked engine root."""

    def __init__(self, root):
        self.root = root
        libs = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu/pulseaudio"]
        self.loader = [os.path.join(root, "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"), "--library-path",
                       ":".join(os.path.join(root, p) for p in libs)]
        self.env = dict(os.environ, ESPEAK_DATA_PATH=os.path.join(root, "usr/lib/x86_64-linux-gnu"),
                        FESTLIBDIR=os.path.join(root, "usr/lib/festival"),
                        FESTDATADIR=os.path.join(root, "usr/share/festival"))

    def cmd(self, prog, *args):
        return self.loader + [os.path.join(self.root, "usr/bin", prog)] + list(args)


def unpack_engines(src, work):
    """Unpack (or copy) the engine root into work/tts-root and point festival's paths at it."""
    root = os.path.join(work, "tts-root")
    if not os.path.isdir(root):
        if os.path.isdir(src):
            shutil.copytree(src, root, symlinks=True)
        else:
            with tarfile.open(src) as t:
                t.extractall(work)
        for f in ("languages.scm", "lexicons.scm", "voices.scm"):
            p = os.path.join(root, "usr/share/festival", f)
            s = open(p).read().replace('"/usr/share/festival/', '"' + root + "/usr/share/festival/")
            open(p, "w").write(s)
    return root


def utterance_spec(seed, i, text, aug_prob):
    r = random.Random("%d:%d" % (seed, i))
    x, engine = r.random(), None
    for name, w in ENGINE_WEIGHTS:
        if x < w:
            engine = name
            break
        x -= w
    engine = engine or ENGINE_WEIGHTS[-1][0]
    spec = {"id": "u%07d" % i, "text": text, "engine": engine}
    if engine == "espeak":
        spec["voice"] = "%s+%s" % (r.choice(ESPEAK_LANGS), r.choice(ESPEAK_VARIANTS))
        spec["rate"] = r.randint(130, 200)            # words per minute
        spec["pitch"] = r.randint(25, 75)             # 0..99
    elif engine == "flite":
        v = r.choice(sorted(FLITE_VOICES))
        spec["voice"] = v
        spec["rate"] = round(r.uniform(0.85, 1.25), 3)  # duration stretch
        lo, hi = FLITE_VOICES[v]
        spec["pitch"] = r.randint(lo, hi)             # target f0 mean, Hz
    else:
        spec["voice"] = r.choice(FESTIVAL_VOICES)
        spec["rate"] = round(r.uniform(0.85, 1.25), 3)  # Duration_Stretch
        spec["pitch"] = None
    aug = {}
    if r.random() < aug_prob:
        if r.random() < 0.5:
            k = r.choice(["speed", "tempo"])
            aug[k] = round(r.uniform(0.88, 1.12), 3)
        if r.random() < 0.4:
            aug["reverb"] = [r.randint(20, 80), r.randint(20, 100)]   # reverberance %, room scale %
        if r.random() < 0.3:
            aug["band"] = r.choice([[300, 3400], [200, 4000], [100, 6000], [0, 5000]])
        if r.random() < 0.6:
            aug["noise"] = [r.choice(["white", "pink", "brown"]), r.randint(8, 30)]  # colour, SNR dB
        aug["gain"] = round(r.uniform(-12, 0), 1)
    spec["aug"] = aug
    return spec


def sox_effects(spec):
    a = spec["aug"]
    fx = ["norm", "-3"]
    if "speed" in a:
        fx += ["speed", str(a["speed"])]
    if "tempo" in a:
        fx += ["tempo", "-s", str(a["tempo"])]
    if "reverb" in a:
        fx += ["reverb", str(a["reverb"][0]), "50", str(a["reverb"][1])]
    if "band" in a:
        lo, hi = a["band"]
        fx += ["sinc", "%d-%d" % (lo, hi)] if lo else ["sinc", "-%d" % hi]
    fx += ["rate", "-h", "16000"]
    if "gain" in a and "noise" not in a:
        fx += ["gain", str(a["gain"])]
    return fx


def run(cmd, env, **kw):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd[-6:]), p.stderr.decode(errors="replace")[-300:]))


def wav_duration(path):
    with wave.open(path) as w:
        return w.getnframes() / w.getframerate()


def synth_chunk(args):
    """Synthesise one chunk of specs; returns manifest records (failed utterances are skipped)."""
    root, out_dir, specs = args
    eng = Engines(root)
    tmp = tempfile.mkdtemp(prefix="synth-", dir=out_dir)
    env = dict(eng.env, TMPDIR=tmp)
    raw = {}
    # festival: one process per voice for the whole chunk (start-up is 0.85 s).
    by_voice = {}
    for s in specs:
        if s["engine"] == "festival":
            by_voice.setdefault(s["voice"], []).append(s)
    for voice, group in by_voice.items():
        scm = os.path.join(tmp, "f-%s.scm" % voice)
        with open(scm, "w") as f:
            f.write("(voice_%s)\n" % voice)
            for s in group:
                p = os.path.join(tmp, s["id"] + ".raw.wav")
                f.write("(Parameter.set 'Duration_Stretch %s)\n" % s["rate"])
                f.write('(set! utt (Utterance Text "%s"))\n(utt.synth utt)\n' % s["text"])
                f.write("(utt.save.wave utt \"%s\" 'riff)\n" % p)
                raw[s["id"]] = p
        try:
            run(eng.cmd("festival", "--libdir", os.path.join(root, "usr/share/festival"), "-b", scm), env,
                timeout=600)
        except Exception as e:  # noqa: BLE001 - one bad batch must not stop the corpus
            print("synth.py: festival %s: %s" % (voice, e), file=sys.stderr)
    records, failed = [], 0
    for s in specs:
        p = raw.get(s["id"]) or os.path.join(tmp, s["id"] + ".raw.wav")
        try:
            if s["engine"] == "espeak":
                run(eng.cmd("espeak-ng", "-v", s["voice"], "-s", str(s["rate"]), "-p", str(s["pitch"]),
                            "-w", p, s["text"]), env, timeout=120)
            elif s["engine"] == "flite":
                run(eng.cmd("flite", "-voice", s["voice"], "--setf", "duration_stretch=%s" % s["rate"],
                            "--setf", "int_f0_target_mean=%s" % s["pitch"], "-t", s["text"], "-o", p),
                    env, timeout=120)
            if not os.path.exists(p):
                continue
            final = os.path.join(out_dir, s["id"] + ".wav")
            sox = eng.cmd("sox")
            if "noise" in s["aug"]:
                mid = os.path.join(tmp, s["id"] + ".mid.wav")
                run(sox + ["-R", "-V1", p, "-r", "16000", "-c", "1", "-b", "16", mid] + sox_effects(s), env,
                    timeout=120)
                dur = wav_duration(mid)
                colour, snr = s["aug"]["noise"]
                # speech normalised to -3 dBFS peak sits near -20 dBFS RMS: noise amplitude for that SNR.
                amp = 10 ** ((-20 - snr) / 20)
                noise = os.path.join(tmp, s["id"] + ".noise.wav")
                run(sox + ["-R", "-V1", "-n", "-r", "16000", "-c", "1", "-b", "16", noise, "synth", "%.4f" % dur,
                           colour + "noise", "vol", "%.5f" % amp], env, timeout=120)
                run(sox + ["-R", "-V1", "-m", "-v", "1", mid, "-v", "1", noise, "-b", "16", final, "gain",
                           str(s["aug"].get("gain", 0))], env, timeout=120)
                os.remove(mid)
                os.remove(noise)
            else:
                run(sox + ["-R", "-V1", p, "-r", "16000", "-c", "1", "-b", "16", final] + sox_effects(s), env,
                    timeout=120)
            os.remove(p)
            rec = dict(s, path=os.path.basename(final), duration=round(wav_duration(final), 4))
            records.append(rec)
        except Exception as e:  # noqa: BLE001
            failed += 1
            if failed <= 3:                      # a broken engine fails every utterance: say it a few times
                print("synth.py: %s (%s %s): %s" % (s["id"], s["engine"], s["voice"], e), file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", required=True, help="tts-root.tar.xz or an unpacked tts-root folder")
    ap.add_argument("--work", default=None, help="where to unpack the engines (default: OUT/..)")
    ap.add_argument("--sentences", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=0, help="utterances (0 = every sentence once)")
    ap.add_argument("--start", type=int, default=0, help="first utterance index (for shards)")
    ap.add_argument("--in-order", action="store_true", help="take sentences in file order, no shuffle")
    ap.add_argument("--aug", type=float, default=0.5, help="probability of an augmentation chain")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--manifest", default=None, help="default OUT/manifest.jsonl")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = a.work or os.path.dirname(os.path.abspath(a.out))
    root = unpack_engines(a.engines, work)
    opener = lzma.open if a.sentences.endswith(".xz") else open
    with opener(a.sentences, "rt") as f:
        sentences = [s.strip() for s in f if s.strip()]
    order = list(range(len(sentences)))
    if not a.in_order:
        random.Random(a.seed).shuffle(order)
    count = a.count or len(sentences)
    specs = [utterance_spec(a.seed, i, sentences[order[i % len(order)]], a.aug)
             for i in range(a.start, a.start + count)]
    chunks = [(root, os.path.abspath(a.out), specs[k:k + a.chunk]) for k in range(0, len(specs), a.chunk)]
    t0 = time.time()
    manifest = a.manifest or os.path.join(a.out, "manifest.jsonl")
    n = dur = 0
    # Written under a temporary name and renamed when complete: a trainer polling for the manifest
    # never reads half a shard.
    with open(manifest + ".part", "w") as mf, ProcessPoolExecutor(max_workers=a.jobs) as ex:
        for recs in ex.map(synth_chunk, chunks):       # ordered: the manifest is deterministic too
            for r in recs:
                mf.write(json.dumps(r, sort_keys=True) + "\n")
                n += 1
                dur += r["duration"]
            mf.flush()
    os.replace(manifest + ".part", manifest)
    el = time.time() - t0
    print("synth.py: %d utterances, %.2f h of audio in %.1f s (%.0f audio s per wall s) -> %s" % (
        n, dur / 3600, el, dur / max(el, 1e-9), manifest), file=sys.stderr)
    if n < 0.95 * len(specs):
        sys.exit("synth.py: only %d of %d utterances were synthesised" % (n, len(specs)))


if __name__ == "__main__":
    main()
