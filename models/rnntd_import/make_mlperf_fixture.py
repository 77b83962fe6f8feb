"""Writes tests/data/mlperf/: a random-weight checkpoint in exactly the layout of the MLPerf RNN-T
reference's published checkpoint (small sizes, the same structure), made by the reference's own model
code, and the reference's own greedy transcripts (and features) of fixed audio. Run once by hand; CI
only reads what it wrote (it needs neither the reference nor librosa).

    # the reference: mlcommons/inference, retired_benchmarks/speech_recognition/rnnt/pytorch (not committed)
    cd models && ../.venv-nemo/bin/python -m rnntd_import.make_mlperf_fixture \\
        --reference /path/to/inference/retired_benchmarks/speech_recognition/rnnt/pytorch --out ../tests/data/mlperf

Needs torch, librosa, soundfile (the reference's imports); the NeMo virtual environment has them.
What is the reference's and what is ours:
  - model: the reference's RNNT class, its `input_eval` feature settings (configs/rnnt.toml: hann 20 ms /
    10 ms, 512-point FFT, 80 mels, frame splicing 3, per-feature normalisation, dither 1e-5 as the
    reference's deterministic dithering), its `rnnt` block with smaller sizes (--hidden etc.);
  - weights: torch's default initialisation under a fixed seed, then the reference's own forget-gate
    bias rule (in its LstmDrop); then the encoder's weights x6 and the joint calibrated by the project's random-model calibration
    (see the comment in main) so that about a quarter of the decoder's steps emit a label;
  - checkpoint: {"state_dict": ...} with the published names (`joint_net.*`, the featurizer's `fb` and
    `window` buffers), as pytorch_SUT.load_and_migrate_checkpoint expects them;
  - transcripts: the reference's AudioPreprocessing (eval mode) and ScriptGreedyDecoder (blank 28,
    max_symbols_per_step 30) over the model scripted and frozen as pytorch_SUT does.
"""
import argparse
import json
import math
import os
import sys
import wave

import numpy as np
import torch

LABELS = [" ", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s",
          "t", "u", "v", "w", "x", "y", "z", "'"]
INPUT_EVAL = dict(normalize="per_feature", sample_rate=16000, window_size=0.02, window_stride=0.01, window="hann",
                  features=80, n_fft=512, frame_splicing=3, dither=0.00001, feat_type="logfbank",
                  normalize_transcripts=True, trim_silence=True, pad_to=0)
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "..", "en-char-small", "samples")


def write_wav(path, pcm16, rate=16000):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(pcm16, dtype="<i2").tobytes())


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")


def synthetic_signals(rng):
    """Awkward lengths for the frame-count rules: N/hop whole and a multiple of 3 (the extra centred
    frame is dropped), whole and not, fractional; a chirp with noise so the features move."""
    out = {}
    for name, n in (("chirp-4800", 4800), ("chirp-4960", 4960), ("chirp-5001", 5001), ("chirp-12345", 12345)):
        t = np.arange(n) / 16000.0
        f = 200 + 3000 * t / max(t[-1], 1e-9)
        x = 0.3 * np.sin(2 * np.pi * np.cumsum(f) / 16000.0) + 0.05 * rng.standard_normal(n)
        out[name] = np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", required=True, help="the reference's pytorch/ directory")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64, help="encoder_n_hidden (1024 in the published model)")
    ap.add_argument("--pred", type=int, default=32, help="pred_n_hidden (320)")
    ap.add_argument("--joint", type=int, default=48, help="joint_n_hidden (512)")
    ap.add_argument("--enc-weight-scale", type=float, default=6.0, help="factor on the encoder's LSTM weights")
    ap.add_argument("--label-rate", type=float, default=0.25, help="share of the decoder's steps that emit a label")
    ap.add_argument("--pred-share", type=float, default=0.7, help="the predictor's spread in the joint (random_model)")
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(a.reference))  # the reference's modules import each other top-level
    from model_separable_rnnt import RNNT  # noqa: E402
    from preprocessing import AudioPreprocessing  # noqa: E402
    from decoders import ScriptGreedyDecoder  # noqa: E402

    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    rnnt_cfg = dict(rnn_type="lstm", encoder_n_hidden=a.hidden, encoder_pre_rnn_layers=2, encoder_stack_time_factor=2,
                    encoder_post_rnn_layers=3, pred_n_hidden=a.pred, pred_rnn_layers=2, forget_gate_bias=1.0,
                    joint_n_hidden=a.joint, dropout=0.32)
    vocab = LABELS + ["<BLANK>"]
    model = RNNT(feature_config=INPUT_EVAL, rnnt=rnnt_cfg, num_classes=len(vocab)).eval()
    pre = AudioPreprocessing(**INPUT_EVAL).eval()

    os.makedirs(os.path.join(a.out, "audio"), exist_ok=True)
    audio = {}
    for fn in sorted(os.listdir(SAMPLES)):
        if fn.endswith(".wav"):
            audio[fn[:-4]] = read_wav(os.path.join(SAMPLES, fn))
    audio.update(synthetic_signals(rng))
    for name, pcm in audio.items():
        if name.startswith("chirp"):
            write_wav(os.path.join(a.out, "audio", name + ".wav"), pcm)

    def features(pcm):
        x = torch.from_numpy(pcm.astype(np.float32) / 32768.0)[None]
        with torch.no_grad():
            f, flen = pre((x, torch.tensor([x.shape[1]])))
        return f, flen      # [1, 240, T1], [1]

    # A random model emits nothing or the same label on every step: its encoder output barely moves
    # over time and the joint's biases outweigh its inputs. The project's own calibration for random
    # models (rnntd_ref.random_model: standardize_joint_, then calibrate_output_bias by simulated greedy
    # decoding) runs on the converted model, over the encoder output of this audio; its joint is then
    # written back into the reference's layout ([W_enc | W_pred], one bias). The transcripts below are
    # still the reference decoder's, on the reference's modules.
    from rnntd_ref.model import RNNTModel
    from rnntd_ref.random_model import calibrate_output_bias, standardize_joint_, target_rates
    from rnntd_import.mlperf import convert
    with torch.no_grad():
        for name, p in model.encoder.named_parameters():
            if "weight" in name:
                p *= a.enc_weight_scale   # livelier encoder output over time (random LSTMs barely move)
    sd = {k.replace("joint.net", "joint_net"): v for k, v in model.state_dict().items()}
    cfg, conv, _, _, _ = convert({"state_dict": sd})
    ours = RNNTModel(cfg).eval()
    ours.load_state_dict({k: v.float() for k, v in conv.items()})
    with torch.no_grad():
        fs = []
        for pcm in audio.values():
            f, flen = features(pcm)
            fs.append(ours.encoder(f[0].T)[0].double())
        labels = torch.from_numpy(rng.integers(0, cfg.vocab_size, size=(64, 24)))
        g = ours.predictor(labels).reshape(-1, cfg.predictor_hidden).double()
    standardize_joint_(ours, fs, g, pred_share=a.pred_share)
    shares = calibrate_output_bias(ours, target_rates(cfg, label_rate=a.label_rate), fs, iters=80)
    print(f"calibrated decoding shares {shares}")
    with torch.no_grad():
        j = ours.joint
        model.joint.net[0].weight.copy_(torch.cat([j.enc.weight, j.pred.weight], dim=1))
        model.joint.net[0].bias.copy_(j.enc.bias + j.pred.bias)
        model.joint.net[-1].weight.copy_(j.out.weight)
        model.joint.net[-1].bias.copy_(j.out.bias)

    state = {k.replace("joint.net", "joint_net"): v.clone() for k, v in model.state_dict().items()}
    state["audio_preprocessor.featurizer.fb"] = pre.featurizer.fb.clone()
    state["audio_preprocessor.featurizer.window"] = pre.featurizer.window.clone()
    torch.save({"state_dict": state, "epoch": 0}, os.path.join(a.out, "rnnt-small.pt"))

    # The reference's own path: load the checkpoint as pytorch_SUT does, script + freeze, decode.
    ckpt = torch.load(os.path.join(a.out, "rnnt-small.pt"), map_location="cpu", weights_only=True)
    migrated = {k.replace("joint_net", "joint.net"): v for k, v in ckpt["state_dict"].items()
                if not k.startswith("audio_preprocessor.")}
    ref = RNNT(feature_config=INPUT_EVAL, rnnt=rnnt_cfg, num_classes=len(vocab))
    ref.load_state_dict(migrated, strict=True)
    ref.eval()
    for part in ("encoder", "prediction", "joint"):
        scripted = torch.jit.script(getattr(ref, part))
        setattr(ref, part, torch.jit._recursive.wrap_cpp_module(torch._C._freeze_module(scripted._c)))
    ref = torch.jit.script(ref)
    decoder = ScriptGreedyDecoder(len(vocab) - 1, ref)
    out = {"reference": "mlcommons/inference retired_benchmarks/speech_recognition/rnnt/pytorch",
           "rnnt": rnnt_cfg, "input_eval": INPUT_EVAL, "seed": a.seed, "calibrated_shares": shares, "utterances": {}}
    os.makedirs(os.path.join(a.out, "features"), exist_ok=True)
    emitted = 0
    frames_total = 0
    for name, pcm in audio.items():
        f, flen = features(pcm)
        with torch.no_grad():
            _, _, tr = decoder.forward(f.permute(2, 0, 1), flen)
        tokens = list(tr[0])
        src = ("models/en-char-small/samples/" if not name.startswith("chirp") else "tests/data/mlperf/audio/") + name + ".wav"
        out["utterances"][name] = {"wav": src, "samples": int(len(pcm)), "feature_frames": int(flen[0]),
                                   "tokens": tokens, "text": "".join(LABELS[t] for t in tokens)}
        np.save(os.path.join(a.out, "features", name + ".npy"), f[0].T.contiguous().numpy().astype(np.float32))
        emitted += len(tokens)
        frames_total += math.ceil(int(flen[0]) / 2)
        print(f"{name}: {len(pcm)} samples, {int(flen[0])} stacked frames, {len(tokens)} tokens: {out['utterances'][name]['text']!r}")
    with open(os.path.join(a.out, "transcripts.json"), "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    print(f"{emitted} tokens over {frames_total} encoder frames; wrote {a.out}")


if __name__ == "__main__":
    main()
