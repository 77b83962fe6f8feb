"""Writes tests/data/nemo/models/: tiny NeMo LSTM transducers built and saved by NeMo itself (random
weights, RNNEncoder with stacking subsampling, RNNTDecoder, RNNTJoint; characters; plain RNN-T and
multi-blank with big blanks [2, 4]) and NeMo's own greedy transcripts of fixed audio, per utterance
(`greedy`) and batched (`greedy_batch`), so that an importer can be held to NeMo without NeMo. Run once:

    cd models && ../.venv-nemo/bin/python -m rnntd_import.make_nemo_fixture --out ../tests/data/nemo/models

Groundwork: rnntd does not convert these yet (NeMo's RNNEncoder uses LSTMs with proj_size and a
LayerNorm after every layer, which the format does not have; models/README.md).
"""
import argparse
import json
import os
import wave

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CLIPS = ["models/en-char-small/samples/01-flite-kal16.wav", "models/en-char-small/samples/02-espeak-en-gb-x-rp-klatt.wav",
         "models/en-char-small/samples/03-festival-kal-diphone.wav", "models/en-char-small/samples/04-flite-rms.wav",
         "tests/data/mlperf/audio/chirp-4800.wav", "tests/data/mlperf/audio/chirp-5001.wav",
         "tests/data/mlperf/audio/chirp-12345.wav"]
LABELS = [" "] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["'"]


def read_wav(path):
    with wave.open(path, "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def config(big_blanks):
    from omegaconf import OmegaConf
    loss = {"loss_name": "default"}
    if big_blanks:
        loss = {"loss_name": "multiblank_rnnt", "multiblank_rnnt_kwargs": {"big_blank_durations": big_blanks, "sigma": 0.05}}
    return OmegaConf.create({
        "sample_rate": 16000, "labels": LABELS, "model_defaults": {"enc_hidden": 32, "pred_hidden": 24},
        "preprocessor": {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor", "sample_rate": 16000,
                         "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01, "window": "hann",
                         "features": 80, "n_fft": 512, "frame_splicing": 1, "dither": 0.00001, "pad_to": 16},
        "encoder": {"_target_": "nemo.collections.asr.modules.RNNEncoder", "feat_in": 80, "n_layers": 2, "d_model": 48,
                    "proj_size": 32, "rnn_type": "lstm", "bidirectional": False, "subsampling": "stacking",
                    "subsampling_factor": 4, "subsampling_conv_channels": -1, "dropout": 0.0},
        "decoder": {"_target_": "nemo.collections.asr.modules.RNNTDecoder", "normalization_mode": None,
                    "random_state_sampling": False, "blank_as_pad": True,
                    "prednet": {"pred_hidden": 24, "pred_rnn_layers": 1, "t_max": None, "dropout": 0.0}},
        "joint": {"_target_": "nemo.collections.asr.modules.RNNTJoint", "log_softmax": None, "preserve_memory": False,
                  "fuse_loss_wer": False, "num_extra_outputs": len(big_blanks),
                  "jointnet": {"joint_hidden": 40, "activation": "relu", "dropout": 0.0}},
        "decoding": dict({"strategy": "greedy", "greedy": {"max_symbols": 5}},
                         **({"big_blank_durations": big_blanks} if big_blanks else {})),
        "loss": loss, "optim": None, "train_ds": None, "validation_ds": None, "test_ds": None,
    })


def transcribe(m, strategy, waves):
    from omegaconf import OmegaConf
    dec = OmegaConf.to_container(m.cfg.decoding)
    dec["strategy"] = strategy
    m.change_decoding_strategy(OmegaConf.create(dec), verbose=False)
    out = []
    for x in waves:
        with torch.no_grad():
            f, flen = m.preprocessor(input_signal=torch.from_numpy(x)[None], length=torch.tensor([len(x)]))
            enc, elen = m.encoder(audio_signal=f, length=flen)
            hyps = m.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=elen, return_hypotheses=True)
        h = hyps[0] if not isinstance(hyps, tuple) else hyps[0][0]
        h = h[0] if isinstance(h, list) else h
        ys = h.y_sequence.tolist() if torch.is_tensor(h.y_sequence) else list(h.y_sequence)
        out.append({"tokens": [int(t) for t in ys], "text": "".join(LABELS[t] for t in ys if t < len(LABELS)),
                    "feature_frames": int(flen[0]), "encoder_frames": int(elen[0])})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import nemo
    from nemo.collections.asr.models import EncDecRNNTModel
    os.makedirs(a.out, exist_ok=True)
    waves = [read_wav(os.path.join(ROOT, c)) for c in CLIPS]
    index = {"nemo_toolkit": nemo.__version__, "torch": torch.__version__, "clips": CLIPS, "models": {}}
    for name, bb, seed in (("char-plain", [], 1), ("char-multiblank", [2, 4], 2)):
        torch.manual_seed(seed)
        m = EncDecRNNTModel(cfg=config(bb)).eval()
        # A random joint emits a label at (nearly) every step: the blank's (and the big blanks') output
        # bias is bisected until NeMo's own greedy decoding gives about 0.4 labels per encoder frame.
        out = m.joint.joint_net[-1]
        blanks = list(range(len(LABELS), len(LABELS) + len(bb) + 1))
        base = out.bias.detach().clone()
        lo, hi = -10.0, 30.0
        frames = None
        for _ in range(12):
            mid = (lo + hi) / 2
            with torch.no_grad():
                out.bias.copy_(base)
                out.bias[blanks] += mid
            r = transcribe(m, "greedy", waves)
            frames = sum(x["encoder_frames"] for x in r)
            if sum(len(x["tokens"]) for x in r) / frames > 0.4:
                lo = mid
            else:
                hi = mid
        with torch.no_grad():
            out.bias.copy_(base)
            out.bias[blanks] += hi
        path = os.path.join(a.out, name + ".nemo")
        m.save_to(path)
        res = {s: transcribe(m, s, waves) for s in ("greedy", "greedy_batch")}
        same = all(p["tokens"] == q["tokens"] for p, q in zip(res["greedy"], res["greedy_batch"]))
        index["models"][name] = {"file": name + ".nemo", "big_blank_durations": bb, "seed": seed, "blank_bias_shift": hi,
                                 "greedy_equals_greedy_batch": same, "transcripts": res}
        print(name, os.path.getsize(path), "bytes;", [len(r["tokens"]) for r in res["greedy"]], "tokens;",
              "greedy == greedy_batch" if same else "greedy and greedy_batch DIFFER")
    with open(os.path.join(a.out, "index.json"), "w") as fh:
        json.dump(index, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
