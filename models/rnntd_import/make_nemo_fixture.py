"""Writes tests/data/nemo/models/: tiny NeMo LSTM transducers built and saved by NeMo itself (random
weights, RNNEncoder with stacking subsampling, RNNTDecoder, RNNTJoint; characters: plain RNN-T and
multi-blank with big blanks [2, 4]; with --bpe also a SentencePiece BPE model, EncDecRNNTBPEModel,
multi-blank [2, 4], its tokenizer trained by NeMo's sentencepiece on a few sentences written here) and
NeMo's own greedy transcripts of fixed audio, per utterance (`greedy`) and batched (`greedy_batch`), so
that rnntd_import.nemo can be held to NeMo without NeMo. Run once:

    cd models && ../.venv-nemo/bin/python -m rnntd_import.make_nemo_fixture --out ../tests/data/nemo/models [--bpe]
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


# Text for the BPE tokenizer: sentences written for this fixture (no corpus is read).
BPE_TEXT = ["the quick model reads the audio and writes the words it hears",
            "a transducer emits a label or a blank at every frame of the encoder",
            "big blanks skip two or four frames at once when nothing is said",
            "these words only teach the tokenizer which pieces to keep"] * 8


def train_bpe(out_dir, vocab_size=40):
    """A SentencePiece BPE model in out_dir (tokenizer.model, tokenizer.vocab, vocab.txt) as NeMo's
    tokenizer scripts make it."""
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import create_spt_model
    os.makedirs(out_dir, exist_ok=True)
    text = os.path.join(out_dir, "text.txt")
    with open(text, "w") as fh:
        fh.write("\n".join(BPE_TEXT) + "\n")
    create_spt_model(text, vocab_size, sample_size=-1, do_lower_case=True, output_dir=out_dir, tokenizer_type="bpe",
                     character_coverage=1.0)
    os.remove(text)
    return out_dir


def config(big_blanks, tokenizer_dir=None):
    from omegaconf import OmegaConf
    loss = {"loss_name": "default"}
    if big_blanks:
        loss = {"loss_name": "multiblank_rnnt", "multiblank_rnnt_kwargs": {"big_blank_durations": big_blanks, "sigma": 0.05}}
    extra = {"tokenizer": {"dir": tokenizer_dir, "type": "bpe"}} if tokenizer_dir else {"labels": LABELS}
    return OmegaConf.create(dict(extra, **{
        "sample_rate": 16000, "model_defaults": {"enc_hidden": 32, "pred_hidden": 24},
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
        # model_type multiblank: NeMo's BPE decoding (RNNTBPEDecoding) takes the blank as V + n only
        # then, and V otherwise (its character decoding always takes V + n)
        "decoding": dict({"strategy": "greedy", "greedy": {"max_symbols": 5}},
                         **({"big_blank_durations": big_blanks, "model_type": "multiblank"} if big_blanks else {})),
        "loss": loss, "optim": None, "train_ds": None, "validation_ds": None, "test_ds": None,
    }))


def labels_of(m):
    """The model's output labels by id (characters, or the tokenizer's pieces)."""
    if hasattr(m, "tokenizer"):
        return [m.tokenizer.ids_to_tokens([i])[0] for i in range(m.tokenizer.vocab_size)]
    return LABELS


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
        labels = labels_of(m)
        out.append({"tokens": [int(t) for t in ys], "text": "".join(labels[t] for t in ys if t < len(labels)),
                    "feature_frames": int(flen[0]), "encoder_frames": int(elen[0])})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bpe", action="store_true", help="also the SentencePiece BPE model (bpe-multiblank)")
    a = ap.parse_args(argv)
    import tempfile

    import nemo
    from nemo.collections.asr.models import EncDecRNNTBPEModel, EncDecRNNTModel
    os.makedirs(a.out, exist_ok=True)
    waves = [read_wav(os.path.join(ROOT, c)) for c in CLIPS]
    index = {"nemo_toolkit": nemo.__version__, "torch": torch.__version__, "clips": CLIPS, "models": {}}
    index_path = os.path.join(a.out, "index.json")
    if os.path.exists(index_path):  # keep the models made before (a rerun with --bpe adds one)
        with open(index_path) as fh:
            old = json.load(fh)
        if old.get("clips") == CLIPS:
            index["models"] = old["models"]
    todo = [("char-plain", [], 1, False), ("char-multiblank", [2, 4], 2, False)]
    if a.bpe:
        todo = [m for m in todo if m[0] not in index["models"]] + [("bpe-multiblank", [2, 4], 3, True)]
    tokdir = tempfile.mkdtemp()
    for name, bb, seed, bpe in todo:
        torch.manual_seed(seed)
        if bpe:
            m = EncDecRNNTBPEModel(cfg=config(bb, train_bpe(tokdir))).eval()
        else:
            m = EncDecRNNTModel(cfg=config(bb)).eval()
        # A random joint emits a label at (nearly) every step: the blank's (and the big blanks') output
        # bias is bisected until NeMo's own greedy decoding gives about 0.4 labels per encoder frame.
        out = m.joint.joint_net[-1]
        V = len(labels_of(m))
        blanks = list(range(V, V + len(bb) + 1))
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
