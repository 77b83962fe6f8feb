"""The MLPerf RNN-T reference checkpoint -> an rnntd model directory.

    python3 -m rnntd_import.mlperf CKPT.pt OUTDIR [--config rnnt.toml] [--name NAME] [--force]

The reference (mlcommons/inference, speech_recognition/rnnt/pytorch: model_separable_rnnt.py, rnn.py,
parts/features.py, decoders.py, configs/rnnt.toml) defines:
  - features (`input_eval`): pre-emphasis 0.97; torch.stft(center=True) with its reflect padding, a
    symmetric hann window of 20 ms (320 samples) centred in a 512-point FFT, hop 10 ms; |X|^2 plus
    dither^2 ("deterministic dithering": no noise at inference); librosa's slaney mel filterbank (80);
    ln(x + 1e-20); frame splicing x3 (stack with stride 3, zero padded); per-feature normalisation
    over the spliced frames (unbiased std + 1e-5); ceil(ceil(N / hop) / 3) frames;
  - encoder: pre_rnn (2 LSTM layers), StackTime x2 (zero padded), post_rnn (3 layers), soft LSTMs;
  - prediction: Embedding(28, 320) (labels only; the start symbol is a zero input), 2 LSTM layers;
  - joint: Linear(enc + pred -> 512) on [f, g], ReLU, (Dropout), Linear(512 -> 29); blank = 28 (last);
  - greedy decoding, at most 30 labels per frame (ScriptGreedyDecoder's max_symbols_per_step).
Each maps exactly to FORMAT.md: frontend center/pad_mode reflect/log_guard add/spectrum_offset/
length hop_ceil/normalize per_feature_stacked, frame_stacking 3, time_stack 2 on the last pre_rnn
layer, the joint's first layer split into its encoder and predictor columns (the bias on the encoder
side), an embedding row of zeros as the start symbol, max_symbols 30.
"""
import argparse
import math
import sys

import numpy as np
import torch

from rnntd_ref.config import (EncoderConfig, FrontendConfig, JointConfig, LayerConfig, ModelConfig,
                              PredictorConfig, validate)

from .common import (CheckpointError, check_featurizer, check_finite, load_torch, lstm_stack, max_abs,
                     predictor_outputs, reference_lstm, write_model)

# configs/rnnt.toml of the reference: [input_eval], [rnnt] (sizes are read from the checkpoint), [labels]
DEFAULT_INPUT = dict(normalize="per_feature", sample_rate=16000, window_size=0.02, window_stride=0.01, window="hann",
                     features=80, n_fft=512, frame_splicing=3, dither=0.00001, feat_type="logfbank", pad_to=0)
DEFAULT_LABELS = [" ", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r",
                  "s", "t", "u", "v", "w", "x", "y", "z", "'"]
PREEMPH = 0.97          # FilterbankFeatures' default; rnnt.toml does not set it
MAX_SYMBOLS = 30        # ScriptGreedyDecoder(max_symbols_per_step=30), as pytorch_SUT.py builds it
_KNOWN_INPUT = set(DEFAULT_INPUT) | {"normalize_transcripts", "trim_silence", "max_duration", "speed_perturbation",
                                     "cutout_rect_regions", "cutout_rect_time", "cutout_rect_freq", "cutout_x_regions",
                                     "cutout_y_regions", "cutout_x_width", "cutout_y_width"}


def read_config(path):
    """rnnt.toml -> (input_eval dict, rnnt dict, labels)."""
    import tomllib
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise CheckpointError(f"{path}: {e}")
    inp = doc.get("input_eval") or doc.get("input")
    if not isinstance(inp, dict):
        raise CheckpointError(f"{path}: input_eval: missing")
    labels = (doc.get("labels") or {}).get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise CheckpointError(f"{path}: labels.labels: missing or not a list of strings")
    return inp, doc.get("rnnt") or {}, labels


def frontend_from_input(inp, where="input_eval"):
    """The reference's feature settings -> (FrontendConfig, frame_stacking); anything the engine's
    frontend would compute differently is an error naming the key."""
    for k in inp:
        if k not in _KNOWN_INPUT:
            raise CheckpointError(f"{where}.{k}: unknown setting (not in the reference's rnnt.toml)")
    get = lambda k: inp.get(k, DEFAULT_INPUT.get(k))  # noqa: E731
    if get("feat_type") not in ("logfbank",):
        raise CheckpointError(f"{where}.feat_type: {get('feat_type')!r} is not supported (only logfbank: log mel features)")
    if get("normalize") != "per_feature":
        raise CheckpointError(f"{where}.normalize: {get('normalize')!r} is not supported (only per_feature)")
    if get("pad_to") not in (0, None):
        raise CheckpointError(f"{where}.pad_to: {get('pad_to')!r}: the reference itself only implements 0")
    if get("window") not in ("hann", "hamming"):
        raise CheckpointError(f"{where}.window: {get('window')!r} is not supported (hann or hamming)")
    sr = int(get("sample_rate"))
    win, hop = int(sr * get("window_size")), int(sr * get("window_stride"))
    n_fft = int(get("n_fft") or 2 ** math.ceil(math.log2(win)))
    if n_fft % 2:
        raise CheckpointError(f"{where}.n_fft: {n_fft} is odd (torch centres frames by n_fft // 2)")
    dither = float(get("dither") or 0.0)
    k = int(get("frame_splicing") or 1)
    fe = FrontendConfig(sample_rate=sr, preemphasis=PREEMPH, dither=0.0, window=get("window"), win_length=win,
                        hop_length=hop, n_fft=n_fft, center=True, pad_mode="reflect", power=2.0,
                        n_mels=int(get("features")), f_min=0.0, f_max=sr / 2, mel_scale="slaney", mel_norm="slaney",
                        log_floor=1e-20, normalize="per_feature_stacked", log_guard="add",
                        spectrum_offset=dither * dither, length="hop_ceil")
    return fe, k


def convert(ckpt, inp=None, labels=None, name="mlperf-rnnt", where="checkpoint"):
    """A loaded checkpoint (dict) -> (ModelConfig, state dict in FORMAT.md names, tokens, notes)."""
    inp = DEFAULT_INPUT if inp is None else inp
    labels = DEFAULT_LABELS if labels is None else labels
    sd = ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else None
    if not isinstance(sd, dict) or not sd or not all(torch.is_tensor(v) for v in sd.values()):
        raise CheckpointError(f"{where}: not a state dict (expected {{'state_dict': {{name: tensor}}}} as the reference saves)")
    sd = {k.replace("joint.net.", "joint_net."): v for k, v in sd.items()}
    check_finite(sd, where)
    for k in sd:
        if k.startswith("encoder.") and not (k.startswith("encoder.pre_rnn.lstm.") or k.startswith("encoder.post_rnn.lstm.")):
            raise CheckpointError(f"{where}: {k}: not the reference's LSTM encoder (pre_rnn, StackTime, post_rnn); "
                                  "other encoders (e.g. conformers) are not supported")
        if not k.startswith(("encoder.", "prediction.embed.", "prediction.dec_rnn.lstm.", "joint_net.",
                             "audio_preprocessor.featurizer.")):
            raise CheckpointError(f"{where}: {k}: unexpected tensor (not in the MLPerf RNN-T layout)")
    fe, k = frontend_from_input(inp)
    notes = []
    pre = lstm_stack(sd, "encoder.pre_rnn.lstm.", where)
    post = lstm_stack(sd, "encoder.post_rnn.lstm.", where)
    pred = lstm_stack(sd, "prediction.dec_rnn.lstm.", where)
    F = fe.n_mels
    if pre[0][0].shape[1] != F * k:
        raise CheckpointError(f"{where}: encoder.pre_rnn.lstm.weight_ih_l0: input {pre[0][0].shape[1]}, expected "
                              f"features {F} x frame_splicing {k} = {F * k}")
    H_pre = pre[-1][1].shape[1]
    if post[0][0].shape[1] % H_pre:
        raise CheckpointError(f"{where}: encoder.post_rnn.lstm.weight_ih_l0: input {post[0][0].shape[1]} is not a "
                              f"multiple of the pre_rnn hidden size {H_pre} (StackTime)")
    stack = post[0][0].shape[1] // H_pre
    emb = sd.get("prediction.embed.weight")
    if emb is None:
        raise CheckpointError(f"{where}: prediction.embed.weight: missing")
    V, E = emb.shape
    if V != len(labels):
        raise CheckpointError(f"{where}: prediction.embed.weight: {V} labels, the vocabulary has {len(labels)}")
    if pred[0][0].shape[1] != E:
        raise CheckpointError(f"{where}: prediction.dec_rnn.lstm.weight_ih_l0: input {pred[0][0].shape[1]}, embedding {E}")
    lin = sorted(int(n.split(".")[1]) for n in sd if n.startswith("joint_net.") and n.endswith(".weight"))
    if len(lin) != 2:
        raise CheckpointError(f"{where}: joint_net: {len(lin)} linear layers, expected 2 (Linear, ReLU, [Dropout], Linear)")
    for i in lin:
        if f"joint_net.{i}.bias" not in sd:
            raise CheckpointError(f"{where}: joint_net.{i}.bias: missing")
    W1, b1 = sd[f"joint_net.{lin[0]}.weight"], sd[f"joint_net.{lin[0]}.bias"]
    W2, b2 = sd[f"joint_net.{lin[1]}.weight"], sd[f"joint_net.{lin[1]}.bias"]
    He, Hp = post[-1][1].shape[1], pred[-1][1].shape[1]
    J = W1.shape[0]
    if W1.shape[1] != He + Hp:
        raise CheckpointError(f"{where}: joint_net.{lin[0]}.weight: input {W1.shape[1]}, expected encoder {He} + prediction {Hp}")
    if tuple(W2.shape) != (V + 1, J):
        raise CheckpointError(f"{where}: joint_net.{lin[1]}.weight: shape {list(W2.shape)}, expected [{V + 1}, {J}] "
                              f"(labels + blank)")
    for i, t in enumerate(labels):
        if t == "":
            raise CheckpointError(f"labels[{i}]: empty label")
    tokens = ["\u2581" if t == " " else t for t in labels]
    if any(" " in t for t in tokens):
        raise CheckpointError("labels: a label holds a space beside other characters; not representable")
    check_featurizer(sd, "audio_preprocessor.featurizer.", fe, where, notes)
    enc_layers = [LayerConfig(input=l[0].shape[1], hidden=l[1].shape[1]) for l in pre + post]
    enc_layers[len(pre) - 1].time_stack = stack
    cfg = ModelConfig(name=name, frontend=fe, feature_dim=F, frame_stacking=k, lstm_activation="soft",
                      encoder=EncoderConfig(enc_layers),
                      predictor=PredictorConfig(embedding=E, layers=[LayerConfig(input=l[0].shape[1], hidden=l[1].shape[1]) for l in pred]),
                      joint=JointConfig(dim=J, activation="relu"), vocab_size=V, big_blank_durations=[],
                      max_symbols=MAX_SYMBOLS)
    try:
        validate(cfg)
    except ValueError as e:
        raise CheckpointError(f"{where}: the converted model breaks a format rule: {e}")
    state = {}
    for i, (w_ih, w_hh, b_ih, b_hh) in enumerate(pre + post):
        for n, t in (("weight_ih", w_ih), ("weight_hh", w_hh), ("bias_ih", b_ih), ("bias_hh", b_hh)):
            state[f"encoder.lstm.{i}.{n}"] = t.detach().double()
    for i, (w_ih, w_hh, b_ih, b_hh) in enumerate(pred):
        for n, t in (("weight_ih", w_ih), ("weight_hh", w_hh), ("bias_ih", b_ih), ("bias_hh", b_hh)):
            state[f"predictor.lstm.{i}.{n}"] = t.detach().double()
    state["predictor.embedding"] = torch.cat([emb.detach().double(), torch.zeros(1, E, dtype=torch.float64)])
    state["joint.enc.weight"] = W1[:, :He].detach().double()
    state["joint.enc.bias"] = b1.detach().double()
    state["joint.pred.weight"] = W1[:, He:].detach().double()
    state["joint.pred.bias"] = torch.zeros(J, dtype=torch.float64)
    state["joint.out.weight"] = W2.detach().double()
    state["joint.out.bias"] = b2.detach().double()
    src = dict(pre=pre, post=post, pred=pred, emb=emb, W1=W1, b1=b1, W2=W2, b2=b2, stack=stack)
    return cfg, state, tokens, notes, src


def verify(model, src, rng):
    """The converted model against the checkpoint's own tensors run through torch.nn.LSTM and the
    reference's joint formula, float64: encoder (with StackTime), predictor from the zero start and
    after labels, joint. Returns {part: max |diff|}."""
    cfg = model.cfg
    T = 7 * cfg.frame_stacking * src["stack"] + 1
    x = torch.from_numpy(rng.standard_normal((T, cfg.feature_dim * cfg.frame_stacking)))
    with torch.no_grad():
        h = reference_lstm(src["pre"], x)
        s = src["stack"]
        pad = (-h.shape[0]) % s
        h = torch.cat([h, h.new_zeros(pad, h.shape[1])]).reshape(-1, s * h.shape[1])
        f_ref = reference_lstm(src["post"], h)
        f, _, _ = model.encoder(x.to(model.predictor.embedding.dtype))
        labels = [int(v) for v in rng.integers(0, cfg.vocab_size, 5)]
        seq = torch.cat([torch.zeros(1, src["emb"].shape[1], dtype=torch.float64),
                         src["emb"].double()[labels]])
        g_ref = reference_lstm(src["pred"], seq)
        g = predictor_outputs(model, labels)
        z_ref = torch.relu(torch.cat([f_ref[:, None, :].expand(-1, g_ref.shape[0], -1),
                                      g_ref[None].expand(f_ref.shape[0], -1, -1)], -1) @ src["W1"].double().T
                           + src["b1"].double()) @ src["W2"].double().T + src["b2"].double()
        z = model.joint(f[:, None, :], g[None, :, :])
    return {"encoder": max_abs(f, f_ref), "predictor": max_abs(g, g_ref), "joint": max_abs(z, z_ref)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m rnntd_import.mlperf", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="the reference's .pt (e.g. the published rnnt.pt)")
    ap.add_argument("outdir")
    ap.add_argument("--config", help="the reference's configs/rnnt.toml (default: its published values)")
    ap.add_argument("--name", default="mlperf-rnnt")
    ap.add_argument("--force", action="store_true", help="replace an existing model directory")
    a = ap.parse_args(argv)
    try:
        inp, labels = None, None
        if a.config:
            inp, rnnt, labels = read_config(a.config)
            if rnnt.get("rnn_type", "lstm") != "lstm":
                raise CheckpointError(f"{a.config}: rnnt.rnn_type: {rnnt.get('rnn_type')!r} is not supported (lstm)")
            if rnnt.get("norm") not in (None,):
                raise CheckpointError(f"{a.config}: rnnt.norm: {rnnt.get('norm')!r} is not supported")
        ckpt = load_torch(a.checkpoint)
        cfg, state, tokens, notes, src = convert(ckpt, inp, labels, a.name, where=a.checkpoint)
        model = write_model(cfg, state, tokens, a.outdir, force=a.force)
        diffs = verify(model, src, np.random.default_rng(0))
    except CheckpointError as e:
        print(f"rnntd_import.mlperf: error: {e}", file=sys.stderr)
        return 1
    enc = ", ".join(f"{l.input}->{l.hidden}" + (f" (time_stack {l.time_stack})" if l.time_stack > 1 else "")
                    for l in cfg.encoder.layers)
    fe = cfg.frontend
    print(f"mapped  encoder: pre_rnn {len(src['pre'])} + post_rnn {len(src['post'])} soft LSTM layers: {enc}")
    print(f"mapped  StackTime x{src['stack']} -> time_stack on encoder layer {len(src['pre']) - 1}")
    print(f"mapped  prediction: embedding [{cfg.vocab_size}, {cfg.predictor.embedding}] + a zero start row, "
          f"{len(cfg.predictor.layers)} LSTM layers of {cfg.predictor_hidden}")
    print(f"mapped  joint: [f, g] -> {cfg.joint.dim} split into enc [{cfg.joint.dim}, {cfg.encoder_hidden}] + "
          f"pred [{cfg.joint.dim}, {cfg.predictor_hidden}], relu, out [{cfg.n_out}, {cfg.joint.dim}] (blank {cfg.blank} last)")
    print(f"mapped  vocabulary: {cfg.vocab_size} labels ('{' '}' -> '\u2581'), max_symbols {cfg.max_symbols}")
    print(f"mapped  frontend: {fe.sample_rate} Hz, {fe.window} {fe.win_length}/{fe.hop_length}, n_fft {fe.n_fft} centred "
          f"(reflect), preemphasis {fe.preemphasis}, |X|^2 + {fe.spectrum_offset:g}, {fe.n_mels} slaney mels, "
          f"ln(x + {fe.log_floor:g}), splicing x{cfg.frame_stacking}, per-feature normalisation after splicing, "
          f"ceil(ceil(N/hop)/{cfg.frame_stacking}) frames")
    for n in notes:
        print(f"checked {n}")
    print("checked model directory reloads through the loader's checks (shapes, names, finite values, tokens)")
    print("verified against the checkpoint's tensors through torch.nn.LSTM, float64, random input: " +
          ", ".join(f"{k} max |diff| {v:.2g}" for k, v in diffs.items()))
    bad = {k: v for k, v in diffs.items() if not v < 1e-9}
    if bad:
        print(f"rnntd_import.mlperf: error: verification failed: {bad}", file=sys.stderr)
        return 1
    print(f"wrote   {a.outdir} ({sum(t.numel() for t in state.values()):,} parameters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
