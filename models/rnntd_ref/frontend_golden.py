"""Golden files for the C feature frontend (engine/frontend.c) from the Python one (models/train/features.py).

    python3 -m rnntd_ref.frontend_golden --out tests/data/frontend     (needs rnntd_train: models/README.md)

Writes, deterministically (the same command writes the same bytes):
  waves/<signal>.npy      float32 [N, 1]: 16-bit PCM values / 32768, so the C test can feed them as float or
                          as int16 and must get the same bits
  <config>/               a tiny random model whose model.yaml carries the frontend under test (the shipped
                          model's frontend is read from models/en-char-small itself, config "en-char-small")
  <config>/<case>.npy     float32 [frames, n_mels]: features.py's LogMel run in float64 (the exact value, up
                          to the FFT's float64 rounding) and rounded once to float32
  <config>/cases.txt      one line per case: "<case> <signal> <n_samples>" (the first n_samples of the wave)

It also measures how far features.py in float32 (what training used and what the shipped .npy files are) is
from the float64 value under the tolerance the C test applies, and refuses to write anything if the float32
frontend itself does not meet it: the C frontend is held to the standard of the training frontend.
"""
import argparse
import math
import os
import shutil

import numpy as np
import torch

from rnntd_train.features import LogMel, read_wav

from .config import FrontendConfig, load_config
from .io import save_model
from .model import RNNTModel
from .npy import save_npy
from .random_model import build_config, default_tokens, randomize_

HERE = os.path.dirname(os.path.abspath(__file__))

N = 2400  # samples of each full-length signal: 13 frames of the shipped frontend

# The tolerance, as tests/engine/test_frontend.c applies it to each feature (natural log of a mel energy):
#   |c - r| <= ATOL + RTOL_FRAME * exp(rmax - r)
# r = the float64 reference, rmax = the largest feature of its frame. A float32 FFT's error is relative to
# the frame's energy, not to each bin's (Parseval), so a mel band 60 dB below the frame's loudest carries
# a relative error about 1e6 times float32's: in the log domain that is RTOL_FRAME * exp(rmax - r).
# Features at the floor (silence) must be exact: the FFT of zeros is exactly zero in any precision.
ATOL = 2e-5
RTOL_FRAME = 2e-6


def signals(rng):
    """name -> int16 PCM of N samples (or fewer), deterministic."""
    n = np.arange(N)
    s = {}
    s["silence"] = np.zeros(N, np.int16)
    s["dc"] = np.full(N, 16384, np.int16)                                     # 0.5 constant
    s["square"] = np.where((n // 18) % 2 == 0, 32767, -32768).astype(np.int16)  # full scale, period 36
    clip = 2.5 * 32767 * np.sin(2 * np.pi * 440.0 * n / 16000.0)
    s["clipped"] = np.clip(np.round(clip), -32768, 32767).astype(np.int16)    # a sine clipped at full scale
    s["noise"] = rng.integers(-32768, 32768, size=N, dtype=np.int64).astype(np.int16)  # white, full scale
    s["lsb"] = rng.integers(-1, 2, size=N, dtype=np.int64).astype(np.int16)   # +-1 LSB: just above the floor
    tone = 3000 * np.sin(2 * np.pi * 220.0 * n / 16000.0) + 2000 * np.sin(2 * np.pi * 1234.5 * n / 16000.0)
    s["speechlike"] = np.round(tone + rng.normal(0, 300, N)).astype(np.int16)
    s["one"] = np.array([12345], np.int16)
    return s


def cases(fe):
    """(case, signal, n_samples): every signal in full, and the awkward lengths on a speech-like one."""
    out = [(name, name, None) for name in ("silence", "dc", "square", "clipped", "noise", "lsb", "speechlike")]
    w, h = fe.win_length, fe.hop_length
    for n in (0, w - 1, w, w + 1, w + 2 * h + 1, w + 5 * h - 1):
        if n <= N:
            out.append((f"len{n}", "speechlike", n))
    out.append(("one", "one", 1))
    return out


# Frontends under test besides the shipped model's: every window, scale and norm, power 1 and 1.5,
# no pre-emphasis and a strong one, n_fft = win_length, an odd n_fft, 8 kHz and 11.025 kHz.
VARIANTS = {
    "hamming-htk": dict(sample_rate=16000, preemphasis=0.0, window="hamming", win_length=400, hop_length=160,
                        n_fft=400, power=1.0, n_mels=40, f_min=20.0, f_max=7600.0, mel_scale="htk",
                        mel_norm="none", log_floor=1e-6),
    "povey-8k": dict(sample_rate=8000, preemphasis=0.5, window="povey", win_length=200, hop_length=80,
                     n_fft=256, power=2.0, n_mels=23, f_min=0.0, f_max=4000.0, mel_scale="htk",
                     mel_norm="slaney", log_floor=1e-10),
    "odd-fft": dict(sample_rate=11025, preemphasis=0.9, window="hann", win_length=301, hop_length=97,
                    n_fft=303, power=1.5, n_mels=17, f_min=50.0, f_max=5000.0, mel_scale="slaney",
                    mel_norm="slaney", log_floor=1e-8),
}


def tiny_model(name, fe_args, seed):
    cfg = build_config(name=f"frontend-{name}", feature_dim=fe_args["n_mels"], frame_stacking=1,
                       encoder_hidden=[3], embedding=3, predictor_hidden=[3], joint_dim=3, vocab_size=3,
                       normalize="none")
    cfg.frontend = FrontendConfig(normalize="none", **fe_args)
    model = RNNTModel(cfg)
    randomize_(model, np.random.default_rng(seed))
    return model


def within(c, r, fe):
    """Boolean mask of the features of c within the tolerance of r (both [T, M])."""
    if r.size == 0:
        return np.ones(r.shape, bool)
    rmax = r.max(axis=1, keepdims=True)
    allowed = ATOL + RTOL_FRAME * np.exp(np.minimum(rmax - r, 80.0))
    return np.abs(c.astype(np.float64) - r) <= allowed


def features(fe, wave_f32, dtype):
    lm = LogMel(fe, dtype=dtype)
    return lm(torch.from_numpy(wave_f32.astype(np.float64 if dtype == torch.float64 else np.float32))).numpy()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shipped", default=os.path.join(HERE, "..", "en-char-small"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    sig = signals(np.random.default_rng(20261124))
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(os.path.join(a.out, "waves"))
    for name, pcm in sig.items():
        save_npy(os.path.join(a.out, "waves", name + ".npy"), (pcm.astype(np.float32) / 32768.0)[:, None])

    configs = {"en-char-small": load_config(os.path.join(a.shipped, "model.yaml")).frontend}
    for i, (name, args) in enumerate(VARIANTS.items()):
        model = tiny_model(name, args, seed=100 + i)
        save_model(model, default_tokens(3), os.path.join(a.out, name))
        configs[name] = model.cfg.frontend
    worst = {}
    for cname, fe in configs.items():
        d = os.path.join(a.out, cname)
        os.makedirs(d, exist_ok=True)
        lines = []
        for case, sname, n in cases(fe):
            wave = sig[sname].astype(np.float32) / 32768.0
            if n is not None:
                wave = wave[:n]
            ref = features(fe, wave, torch.float64)
            f32 = features(fe, wave, torch.float32)
            ok = within(f32, ref, fe)
            if not ok.all():
                raise SystemExit(f"{cname}/{case}: features.py in float32 misses the tolerance at "
                                 f"{np.argwhere(~ok)[:5].tolist()}: loosen it or find out why")
            if ref.size:
                rel = np.abs(f32 - ref) / (ATOL + RTOL_FRAME * np.exp(np.minimum(ref.max(1, keepdims=True) - ref, 80)))
                worst[f"{cname}/{case}"] = float(rel.max())
            save_npy(os.path.join(d, case + ".npy"), ref.astype(np.float32).reshape(-1, fe.n_mels))
            lines.append(f"{case} {sname} {len(wave)}")
        with open(os.path.join(d, "cases.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
    # The shipped samples: their .npy files are what features.py gives in float32 (the C test compares the
    # C frontend with them directly); say how far they are from float64 here.
    fe = configs["en-char-small"]
    for wav in sorted(os.listdir(os.path.join(a.shipped, "samples"))):
        if wav.endswith(".wav"):
            x, sr = read_wav(os.path.join(a.shipped, "samples", wav))
            ref = features(fe, x, torch.float64)
            f32 = features(fe, x, torch.float32)
            shipped = np.load(os.path.join(a.shipped, "samples", wav[:-4] + ".npy"))
            print(f"{wav}: shipped .npy vs features.py float32 here: max |diff| {np.abs(shipped - f32).max():.3g}; "
                  f"float32 within tolerance of float64: {bool(within(f32, ref, fe).all())}")
    top = sorted(worst.items(), key=lambda kv: -kv[1])[:5]
    print("features.py float32: largest error / allowed: " + ", ".join(f"{k} {v:.3f}" for k, v in top))
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(a.out) for f in fs)
    print(f"wrote {a.out}: {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
