"""Writes tests/data/nemo/frontend/: NeMo's own AudioToMelSpectrogramPreprocessor (eval mode, one
utterance per call) run on fixed audio, with two preprocessor settings (NeMo's defaults with 80 mels
and 25 ms windows as its LSTM transducer configs use; a variant with hamming, clamp guard, no mel norm,
mag_power 1 and no normalisation), so tests can hold rnntd's frontend to NeMo's without NeMo. Run once:

    cd models && ../.venv-nemo/bin/python -m rnntd_import.make_nemo_frontend_fixture --out ../tests/data/nemo/frontend
"""
import argparse
import json
import os
import wave

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CLIPS = ["models/en-char-small/samples/01-flite-kal16.wav", "models/en-char-small/samples/04-flite-rms.wav",
         "tests/data/mlperf/audio/chirp-4800.wav", "tests/data/mlperf/audio/chirp-5001.wav"]
SETTINGS = {
    "lstm-default": dict(sample_rate=16000, normalize="per_feature", window_size=0.025, window_stride=0.01,
                         window="hann", features=80, n_fft=512, frame_splicing=1, dither=0.00001, pad_to=0),
    "variant": dict(sample_rate=16000, normalize="NA", window_size=0.02, window_stride=0.01, window="hamming",
                    features=64, n_fft=None, frame_splicing=1, dither=0.0, pad_to=0, log_zero_guard_type="clamp",
                    log_zero_guard_value=1e-5, mel_norm=None, mag_power=1.0, preemph=0.9),
}


def read_wav(path):
    with wave.open(path, "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import nemo
    from nemo.collections.asr.modules import AudioToMelSpectrogramPreprocessor
    os.makedirs(a.out, exist_ok=True)
    index = {"nemo_toolkit": nemo.__version__, "torch": torch.__version__, "settings": SETTINGS, "cases": []}
    for sname, s in SETTINGS.items():
        pre = AudioToMelSpectrogramPreprocessor(**s).eval()
        for clip in CLIPS:
            x = torch.from_numpy(read_wav(os.path.join(ROOT, clip)))[None]
            with torch.no_grad():
                f, flen = pre(input_signal=x, length=torch.tensor([x.shape[1]]))
            feats = f[0, :, :int(flen[0])].T.contiguous().numpy().astype(np.float32)
            name = f"{sname}--{os.path.basename(clip)[:-4]}"
            np.save(os.path.join(a.out, name + ".npy"), feats)
            index["cases"].append({"name": name, "settings": sname, "wav": clip, "frames": int(flen[0])})
            print(name, feats.shape)
    with open(os.path.join(a.out, "index.json"), "w") as fh:
        json.dump(index, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
