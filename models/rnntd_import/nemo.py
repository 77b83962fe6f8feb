"""A NeMo LSTM transducer (.nemo) -> an rnntd model directory, without NeMo installed.

    python3 -m rnntd_import.nemo MODEL.nemo OUTDIR [--name NAME] [--force]

A .nemo file is a tar (optionally gzipped) holding model_config.yaml and model_weights.ckpt (a torch
state dict). What is converted (NeMo 2.x names; each maps exactly to FORMAT.md or is an error naming the
key):
  - preprocessor: AudioToMelSpectrogramPreprocessor (nemo_frontend.py);
  - encoder: RNNEncoder, rnn_type lstm, unidirectional. Its pre_encode is StackingSubsampling (frame
    stacking by subsampling_factor, then Linear(k*feat_in -> proj_size)) or, without subsampling, a
    Linear(feat_in -> proj_size). The Linear is folded into layer 0's input weights in float64
    (W_ih W_pre, b_ih + W_ih b_pre): the same function, one GEMM less. Then n_layers x [LSTM(proj_size
    -> d_model, proj_size) -> LayerNorm(proj_size)] = FORMAT.md's `proj` and `layer_norm`;
  - the encoder's frame count: StackingSubsampling gives floor((T + pad) / k) frames, pad being what
    makes the (pad_to-padded) feature tensor a multiple of k. For one utterance that is floor(T / k)
    when pad_to is a multiple of k (stacking_tail: drop) and ceil(T / k) when pad_to is 0 (pad);
  - decoder: RNNTDecoder, LSTM prediction network (normalization_mode null), its embedding with the
    start symbol as a zero row (NeMo starts from predict(None), a zero input);
  - joint: RNNTJoint, relu or tanh, joint_net's last Linear [V + n + 1] as it is (FORMAT.md's layout is
    NeMo's multi-blank layout); big blank durations from the config (decoding / loss);
  - vocabulary: the character labels, ' ' -> U+2581;
  - decoding.greedy.max_symbols (or max_symbols_per_step) -> max_symbols.
"""
import argparse
import io
import os
import sys
import tarfile

import numpy as np
import torch
import yaml

from rnntd_ref.config import EncoderConfig, JointConfig, LayerConfig, ModelConfig, PredictorConfig, validate

from .common import (CheckpointError, check_featurizer, check_finite, lstm_stack, max_abs, predictor_outputs,
                     reference_lstm, write_model)
from .nemo_frontend import frontend_from_preprocessor

SPACE = "\u2581"
_ENCODERS_OK = ("nemo.collections.asr.modules.RNNEncoder", "nemo.collections.asr.modules.rnn_encoder.RNNEncoder")
_DECODERS_OK = ("nemo.collections.asr.modules.RNNTDecoder", "nemo.collections.asr.modules.rnnt.RNNTDecoder")
_JOINTS_OK = ("nemo.collections.asr.modules.RNNTJoint", "nemo.collections.asr.modules.rnnt.RNNTJoint")


_SMALL_FILE = 64 << 20  # tokenizer files are read into memory; weights are read separately


def read_nemo(path, with_files=False):
    """.nemo -> (config dict, state dict[, {member basename: bytes} of the archive's other small files,
    e.g. a tokenizer]). Errors name the file and what is missing."""
    try:
        tf = tarfile.open(path, "r:*")
    except (OSError, tarfile.TarError) as e:
        raise CheckpointError(f"{path}: not a .nemo archive ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})")
    with tf:
        members = {os.path.normpath(m.name).lstrip("./"): m for m in tf.getmembers() if m.isfile()}
        def read(name):
            m = members.get(name)
            if m is None:
                raise CheckpointError(f"{path}: {name}: missing from the archive (holds {sorted(members)[:6]})")
            return tf.extractfile(m).read()
        try:
            cfg = yaml.safe_load(read("model_config.yaml").decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{path}: model_config.yaml: not readable YAML ({str(e).splitlines()[0][:200]})")
        raw = read("model_weights.ckpt")
        files = {os.path.basename(n): tf.extractfile(m).read() for n, m in members.items()
                 if n not in ("model_config.yaml", "model_weights.ckpt") and m.size <= _SMALL_FILE}
    try:
        sd = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable state dict is the user's input error
        raise CheckpointError(f"{path}: model_weights.ckpt: not a readable state dict ({type(e).__name__}: "
                              f"{str(e).splitlines()[0][:200] if str(e) else ''})")
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path}: model_config.yaml: not a mapping")
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    if not isinstance(sd, dict):
        raise CheckpointError(f"{path}: model_weights.ckpt: not a state dict")
    return (cfg, sd, files) if with_files else (cfg, sd)


def _need(sd, key, shape=None, where="model_weights.ckpt"):
    if key not in sd:
        raise CheckpointError(f"{where}: {key}: missing")
    t = sd[key]
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise CheckpointError(f"{where}: {key}: shape {list(t.shape)}, expected {list(shape)}")
    return t.detach().double()


def _section(cfg, key):
    s = cfg.get(key)
    if not isinstance(s, dict):
        raise CheckpointError(f"model_config.yaml: {key}: missing")
    return s


def _durations(cfg):
    """The big blank durations, where the config says them; all places must agree."""
    found = {}
    dec = cfg.get("decoding") or {}
    if dec.get("big_blank_durations"):
        found["decoding.big_blank_durations"] = list(dec["big_blank_durations"])
    loss = cfg.get("loss") or {}
    mb = (loss.get("multiblank_rnnt_kwargs") or {}).get("big_blank_durations")
    if mb:
        found["loss.multiblank_rnnt_kwargs.big_blank_durations"] = list(mb)
    if dec.get("durations") or (loss.get("loss_name") == "tdt"):
        raise CheckpointError("model_config.yaml: decoding.durations: TDT (token-and-duration) transducers are not "
                              "supported (rnntd decodes RNN-T and multi-blank RNN-T)")
    vals = {tuple(v) for v in found.values()}
    if len(vals) > 1:
        raise CheckpointError("model_config.yaml: big_blank_durations differ: " +
                              ", ".join(f"{k} = {v}" for k, v in found.items()))
    return [int(d) for d in (vals.pop() if vals else ())], found


def _varint(b, i):
    v = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def _proto_fields(b):
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes for the rest."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = _varint(b, i)
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {w}")
        if i > len(b):
            raise ValueError("truncated field")
        yield f, w, v


def sentencepiece_pieces(model_bytes):
    """The pieces of a SentencePiece model file (sentencepiece_model.proto: ModelProto.pieces = field 1,
    SentencePiece.piece = field 1), in id order, without the sentencepiece library."""
    pieces = []
    for f, w, v in _proto_fields(model_bytes):
        if f == 1 and w == 2:
            piece = [pv for pf, pw, pv in _proto_fields(v) if pf == 1 and pw == 2]
            if len(piece) != 1:
                raise ValueError("a piece without its text")
            pieces.append(piece[0].decode("utf-8"))
    if not pieces:
        raise ValueError("no pieces")
    return pieces


def _tokenizer_vocabulary(tok, files):
    """NeMo's SentencePiece tokenizer (tokenizer.type bpe/unigram, model_path nemo:..._tokenizer.model
    inside the .nemo) -> its pieces by id. Word boundaries are already FORMAT.md's: '▁' before a word."""
    kind = tok.get("type")
    if kind not in ("bpe", "unigram"):
        raise CheckpointError(f"model_config.yaml: tokenizer.type: {kind!r} is not supported (SentencePiece: bpe or "
                              "unigram; wordpiece and aggregate tokenizers are not)")
    mp = tok.get("model_path")
    if not isinstance(mp, str) or not mp:
        raise CheckpointError("model_config.yaml: tokenizer.model_path: missing (the SentencePiece model)")
    name = os.path.basename(mp[len("nemo:"):] if mp.startswith("nemo:") else mp)
    if name not in files:
        raise CheckpointError(f"model_config.yaml: tokenizer.model_path: {name} is not in the archive")
    try:
        return sentencepiece_pieces(files[name])
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{name}: not a SentencePiece model ({e})")


def _vocabulary(cfg, files=None):
    labels = cfg.get("labels")
    tok = cfg.get("tokenizer")
    if tok:
        if not isinstance(tok, dict):
            raise CheckpointError("model_config.yaml: tokenizer: not a mapping")
        labels = _tokenizer_vocabulary(tok, files or {})
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        raise CheckpointError("model_config.yaml: labels: missing or not a list of strings")
    tokens = []
    for i, s in enumerate(labels):
        if s == " ":
            tokens.append(SPACE)
        elif not s or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7f for c in s) or len(s.encode("utf-8")) > 64:
            raise CheckpointError(f"model_config.yaml: {'tokenizer piece' if tok else 'labels'}[{i}]: {s!r} is empty, "
                                  "longer than 64 bytes or holds whitespace or a control character (only the single "
                                  "space maps, to U+2581)")
        else:
            tokens.append(s)
    if len(set(tokens)) != len(tokens):
        raise CheckpointError("model_config.yaml: labels: repeated label")
    return tokens


def convert(cfg, sd, name, where, files=None):
    """NeMo config + state dict (+ the archive's other files, for a tokenizer) -> (ModelConfig, state
    float64, tokens, notes, src for verify)."""
    notes = []
    target = cfg.get("target", "")
    if target and "RNNT" not in target and "Transducer" not in target:
        raise CheckpointError(f"model_config.yaml: target: {target!r} is not a transducer (EncDecRNNTModel)")
    check_finite(sd, where)
    tokens = _vocabulary(cfg, files)
    tok_model = bool(cfg.get("tokenizer"))
    V = len(tokens)
    fe = frontend_from_preprocessor(_section(cfg, "preprocessor"))
    F = fe.n_mels

    enc = _section(cfg, "encoder")
    et = enc.get("_target_", "")
    if et not in _ENCODERS_OK:
        raise CheckpointError(f"model_config.yaml: encoder._target_: {et!r} is not supported (RNNEncoder with LSTMs "
                              "only; conformer, citrinet, contextnet and other encoders have no rnntd counterpart)")
    if enc.get("rnn_type", "lstm") != "lstm":
        raise CheckpointError(f"model_config.yaml: encoder.rnn_type: {enc.get('rnn_type')!r} is not supported (lstm)")
    if enc.get("bidirectional", True):
        raise CheckpointError("model_config.yaml: encoder.bidirectional: true is not supported (rnntd decodes causally)")
    if int(enc.get("feat_in", F)) != F:
        raise CheckpointError(f"model_config.yaml: encoder.feat_in: {enc.get('feat_in')} differs from preprocessor.features {F}")
    sub, k = enc.get("subsampling", "striding"), int(enc.get("subsampling_factor", 4))
    P, H, n_layers = int(enc.get("proj_size", -1)), int(enc.get("d_model", 0)), int(enc.get("n_layers", 0))
    if sub and k > 1:
        if sub != "stacking":
            raise CheckpointError(f"model_config.yaml: encoder.subsampling: {sub!r} is not supported (stacking, or "
                                  "subsampling_factor 1)")
        w_pre = _need(sd, "encoder.pre_encode.proj_out.weight", (P, k * F))
        b_pre = _need(sd, "encoder.pre_encode.proj_out.bias", (P,))
        pad_to = int(_section(cfg, "preprocessor").get("pad_to", 16) or 0)
        if pad_to == 0:
            tail = "pad"
        elif pad_to % k == 0:
            tail = "drop"
        else:
            raise CheckpointError(f"model_config.yaml: preprocessor.pad_to: {pad_to} is not 0 or a multiple of "
                                  f"encoder.subsampling_factor {k} (the encoder's frame count would depend on it)")
    else:
        k, tail = 1, "pad"
        w_pre = _need(sd, "encoder.pre_encode.weight", (P, F))
        b_pre = _need(sd, "encoder.pre_encode.bias", (P,))
    extra = [key for key in sd if key.startswith("encoder.pre_encode.") and not key.startswith(
        "encoder.pre_encode.proj_out." if k > 1 else "encoder.pre_encode.") or key.startswith("encoder.pre_encode.pre_norm")]
    if extra:
        raise CheckpointError(f"{where}: {extra[0]}: unexpected tensor in the encoder's pre_encode")
    layers, state = [], {}
    for i in range(n_layers):
        _need(sd, f"encoder.layers.{3 * i}.weight_hr_l0")  # NeMo's RNNEncoder LSTMs always project
        stack = lstm_stack(sd, f"encoder.layers.{3 * i}.", where, proj=True)
        if len(stack) != 1:
            raise CheckpointError(f"{where}: encoder.layers.{3 * i}: {len(stack)} stacked layers, expected 1")
        w_ih, w_hh, b_ih, b_hh, w_hr = stack[0]
        if w_hr is None or tuple(w_hr.shape) != (P, H) or tuple(w_ih.shape) != (4 * H, P):
            raise CheckpointError(f"{where}: encoder.layers.{3 * i}.weight_hr_l0: missing or not [{P}, {H}] "
                                  f"(encoder.proj_size {P}, d_model {H})")
        ln_w = _need(sd, f"encoder.layers.{3 * i + 1}.weight", (P,))
        ln_b = _need(sd, f"encoder.layers.{3 * i + 1}.bias", (P,))
        w_ih, b_ih = w_ih.double(), b_ih.double()
        if i == 0:  # the pre-encoder Linear folded in
            b_ih = b_ih + w_ih @ b_pre
            w_ih = w_ih @ w_pre
        layers.append(LayerConfig(input=w_ih.shape[1], hidden=H, proj=P, layer_norm=True))
        for n, t in (("weight_ih", w_ih), ("weight_hh", w_hh), ("bias_ih", b_ih), ("bias_hh", b_hh),
                     ("weight_hr", w_hr), ("norm.weight", ln_w), ("norm.bias", ln_b)):
            state[f"encoder.lstm.{i}.{n}"] = t.detach().double()
    known = {f"encoder.layers.{3 * i}.{n}_l0" for i in range(n_layers) for n in
             ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")}
    known |= {f"encoder.layers.{3 * i + 1}.{n}" for i in range(n_layers) for n in ("weight", "bias")}
    for key in sd:
        if key.startswith("encoder.layers.") and key not in known:
            raise CheckpointError(f"{where}: {key}: unexpected tensor (encoder.n_layers is {n_layers})")
    if not layers:
        raise CheckpointError("model_config.yaml: encoder.n_layers: no layers")

    dec = _section(cfg, "decoder")
    if dec.get("_target_", "") not in _DECODERS_OK:
        raise CheckpointError(f"model_config.yaml: decoder._target_: {dec.get('_target_')!r} is not supported (RNNTDecoder)")
    if dec.get("normalization_mode") not in (None, "null"):
        raise CheckpointError(f"model_config.yaml: decoder.normalization_mode: {dec.get('normalization_mode')!r} is "
                              "not supported (null)")
    if int(dec.get("vocab_size", V)) != V:
        raise CheckpointError(f"model_config.yaml: decoder.vocab_size: {dec.get('vocab_size')} differs from the "
                              f"{V} labels")
    emb = _need(sd, "decoder.prediction.embed.weight")
    E = emb.shape[1]
    if emb.shape[0] == V + 1:
        emb = emb[:V]  # row V is the blank (padding_idx): never fed; NeMo starts from a zero input
    elif emb.shape[0] != V:
        raise CheckpointError(f"{where}: decoder.prediction.embed.weight: {emb.shape[0]} rows for {V} labels "
                              f"(expected {V} or {V + 1}): mismatched vocabulary")
    pred = lstm_stack(sd, "decoder.prediction.dec_rnn.lstm.", where)
    for key in sd:
        if key.startswith("decoder.") and not key.startswith(("decoder.prediction.dec_rnn.lstm.", "decoder.prediction.embed.")):
            raise CheckpointError(f"{where}: {key}: unexpected tensor in the prediction network")
    if pred[0][0].shape[1] != E:
        raise CheckpointError(f"{where}: decoder.prediction.dec_rnn.lstm.weight_ih_l0: input {pred[0][0].shape[1]}, "
                              f"embedding {E}")
    for i, (w_ih, w_hh, b_ih, b_hh) in enumerate(pred):
        for n, t in (("weight_ih", w_ih), ("weight_hh", w_hh), ("bias_ih", b_ih), ("bias_hh", b_hh)):
            state[f"predictor.lstm.{i}.{n}"] = t.detach().double()
    state["predictor.embedding"] = torch.cat([emb, torch.zeros(1, E, dtype=torch.float64)])

    jt = _section(cfg, "joint")
    if jt.get("_target_", "") not in _JOINTS_OK:
        raise CheckpointError(f"model_config.yaml: joint._target_: {jt.get('_target_')!r} is not supported (RNNTJoint)")
    jn = jt.get("jointnet") or {}
    act = jn.get("activation", "relu")
    if act not in ("relu", "tanh"):
        raise CheckpointError(f"model_config.yaml: joint.jointnet.activation: {act!r} is not supported (relu or tanh)")
    if jt.get("log_softmax") not in (None, False, "null"):
        pass  # a log-softmax does not change the argmax greedy decoding takes
    durations, said = _durations(cfg)
    if durations and tok_model and (cfg.get("decoding") or {}).get("model_type") != "multiblank":
        # NeMo's RNNTBPEDecoding takes the blank as V + n only with model_type multiblank, else as V (so
        # it decodes the last tokens as big blanks): rnntd cannot decode as that does
        raise CheckpointError(f"model_config.yaml: decoding.model_type: "
                              f"{(cfg.get('decoding') or {}).get('model_type')!r}, but a multi-blank model with a "
                              "tokenizer needs multiblank (NeMo then decodes with blank V + n, as rnntd does)")
    n_extra = int(jt.get("num_extra_outputs", 0) or 0)
    if n_extra != len(durations):
        raise CheckpointError(f"model_config.yaml: joint.num_extra_outputs: {n_extra}, but {len(durations)} big blank "
                              f"durations {durations}")
    if int(jt.get("num_classes", V)) != V:
        raise CheckpointError(f"model_config.yaml: joint.num_classes: {jt.get('num_classes')} differs from the {V} labels")
    outs = sorted(int(key.split(".")[2]) for key in sd if key.startswith("joint.joint_net.") and key.endswith(".weight"))
    if not outs:
        raise CheckpointError(f"{where}: joint.joint_net.N.weight: missing")
    last = outs[-1]
    Wo = _need(sd, f"joint.joint_net.{last}.weight")
    bo = _need(sd, f"joint.joint_net.{last}.bias", (Wo.shape[0],))
    J = Wo.shape[1]
    if Wo.shape[0] != V + n_extra + 1:
        raise CheckpointError(f"{where}: joint.joint_net.{last}.weight: {Wo.shape[0]} outputs, expected {V} labels + "
                              f"{n_extra} big blanks + blank = {V + n_extra + 1}: mismatched vocabulary")
    Hp = pred[-1][1].shape[1]
    state["joint.enc.weight"] = _need(sd, "joint.enc.weight", (J, P))
    state["joint.enc.bias"] = _need(sd, "joint.enc.bias", (J,))
    state["joint.pred.weight"] = _need(sd, "joint.pred.weight", (J, Hp))
    state["joint.pred.bias"] = _need(sd, "joint.pred.bias", (J,))
    state["joint.out.weight"] = Wo
    state["joint.out.bias"] = bo
    for key in sd:
        if key.startswith("joint.") and key not in ("joint.enc.weight", "joint.enc.bias", "joint.pred.weight",
                                                    "joint.pred.bias", f"joint.joint_net.{last}.weight",
                                                    f"joint.joint_net.{last}.bias"):
            raise CheckpointError(f"{where}: {key}: unexpected tensor in the joint")
    for key in sd:
        if not key.startswith(("encoder.", "decoder.", "joint.", "preprocessor.")):
            raise CheckpointError(f"{where}: {key}: a module rnntd does not know (not preprocessor, encoder, decoder, joint)")

    greedy = ((cfg.get("decoding") or {}).get("greedy") or {})
    ms = greedy.get("max_symbols") or greedy.get("max_symbols_per_step")
    if not ms:
        raise CheckpointError("model_config.yaml: decoding.greedy.max_symbols: not set (NeMo then allows unlimited "
                              "labels per frame; rnntd needs a bound)")
    check_featurizer(sd, "preprocessor.featurizer.", fe, where, notes)
    for key, v in said.items():
        notes.append(f"{key} = {v}")
    mcfg = ModelConfig(name=name, frontend=fe, feature_dim=F, frame_stacking=k, lstm_activation="soft",
                       encoder=EncoderConfig(layers),
                       predictor=PredictorConfig(embedding=E, layers=[LayerConfig(input=p[0].shape[1], hidden=p[1].shape[1])
                                                                      for p in pred]),
                       joint=JointConfig(dim=J, activation=act), vocab_size=V, big_blank_durations=durations,
                       max_symbols=int(ms), stacking_tail=tail)
    try:
        validate(mcfg)
    except ValueError as e:
        raise CheckpointError(f"{where}: the converted model breaks a format rule: {e}")
    src = dict(w_pre=w_pre, b_pre=b_pre, sd=sd, n_layers=n_layers, pred=pred, emb=emb, Wo=Wo, bo=bo, act=act, k=k)
    return mcfg, state, tokens, notes, src


def verify(model, src, rng):
    """The converted model against NeMo's modules rebuilt from the state dict with torch itself, float64:
    StackingSubsampling's reshape + Linear, torch.nn.LSTM(proj_size) + torch.nn.LayerNorm per layer,
    torch.nn.LSTM prediction network from a zero input, the joint. Returns {part: max |diff|}."""
    cfg, sd, k = model.cfg, src["sd"], src["k"]
    T1 = 9
    x = torch.from_numpy(rng.standard_normal((T1 * k, cfg.feature_dim)))
    with torch.no_grad():
        h = x.reshape(T1, k * cfg.feature_dim) @ src["w_pre"].T + src["b_pre"]
        for i in range(src["n_layers"]):
            w_ih = sd[f"encoder.layers.{3 * i}.weight_ih_l0"].double()
            w_hr = sd[f"encoder.layers.{3 * i}.weight_hr_l0"].double()
            lstm = torch.nn.LSTM(w_ih.shape[1], w_hr.shape[1], proj_size=w_hr.shape[0]).double()
            for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"):
                getattr(lstm, n + "_l0").copy_(sd[f"encoder.layers.{3 * i}.{n}_l0"].double())
            h, _ = lstm(h[:, None, :])
            ln = torch.nn.LayerNorm(w_hr.shape[0]).double()
            ln.weight.copy_(sd[f"encoder.layers.{3 * i + 1}.weight"].double())
            ln.bias.copy_(sd[f"encoder.layers.{3 * i + 1}.bias"].double())
            h = ln(h[:, 0, :])
        f_ref = h
        f, _, _ = model.encoder(x.reshape(T1, k * cfg.feature_dim).to(model.predictor.embedding.dtype))
        labels = [int(v) for v in rng.integers(0, cfg.vocab_size, 5)]
        seq = torch.cat([torch.zeros(1, src["emb"].shape[1], dtype=torch.float64), src["emb"][labels]])
        g_ref = reference_lstm(src["pred"], seq)
        g = predictor_outputs(model, labels)
        a = torch.relu if src["act"] == "relu" else torch.tanh
        hid = (f_ref @ sd["joint.enc.weight"].double().T + sd["joint.enc.bias"].double())[:, None, :] + \
              (g_ref @ sd["joint.pred.weight"].double().T + sd["joint.pred.bias"].double())[None, :, :]
        z_ref = a(hid) @ src["Wo"].T + src["bo"]
        z = model.joint(f[:, None, :], g[None, :, :])
    return {"encoder": max_abs(f, f_ref), "predictor": max_abs(g, g_ref), "joint": max_abs(z, z_ref)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m rnntd_import.nemo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("nemo", help="a NeMo .nemo file (EncDecRNNTModel with an RNNEncoder)")
    ap.add_argument("outdir")
    ap.add_argument("--name", help="model name (default: the file's name)")
    ap.add_argument("--force", action="store_true", help="replace an existing model directory")
    a = ap.parse_args(argv)
    name = a.name or "".join(c if c.isalnum() or c in "._-" else "-" for c in
                             os.path.splitext(os.path.basename(a.nemo))[0])[:64] or "nemo"
    try:
        cfg, sd, files = read_nemo(a.nemo, with_files=True)
        mcfg, state, tokens, notes, src = convert(cfg, sd, name, where=a.nemo, files=files)
        model = write_model(mcfg, state, tokens, a.outdir, force=a.force)
        diffs = verify(model, src, np.random.default_rng(0))
    except CheckpointError as e:
        print(f"rnntd_import.nemo: error: {e}", file=sys.stderr)
        return 1
    fe, L = mcfg.frontend, mcfg.encoder.layers
    print(f"mapped  preprocessor: {fe.sample_rate} Hz, {fe.window} {fe.win_length}/{fe.hop_length}, n_fft {fe.n_fft} "
          f"centred (reflect), preemphasis {fe.preemphasis}, |X|^{fe.power:g}, {fe.n_mels} slaney mels "
          f"({fe.mel_norm} norm), ln(x {'+' if fe.log_guard == 'add' else 'max'} {fe.log_floor:g}), "
          f"normalize {fe.normalize}, no dither (eval)")
    if src["k"] > 1:
        print(f"mapped  encoder.pre_encode: StackingSubsampling x{src['k']} -> frame_stacking {src['k']} "
              f"(stacking_tail {mcfg.stacking_tail}), its Linear [{L[0].proj}, {src['k'] * fe.n_mels}] folded into "
              f"layer 0's weight_ih")
    else:
        print(f"mapped  encoder.pre_encode: Linear [{L[0].proj}, {fe.n_mels}] folded into layer 0's weight_ih")
    print(f"mapped  encoder: {len(L)} x LSTM(hidden {L[0].hidden}, proj {L[0].proj}) + LayerNorm({L[0].proj}), soft")
    print(f"mapped  decoder: embedding [{mcfg.vocab_size}, {mcfg.predictor.embedding}] + a zero start row, "
          f"{len(mcfg.predictor.layers)} LSTM layer(s) of {mcfg.predictor_hidden}")
    print(f"mapped  joint: enc [{mcfg.joint.dim}, {mcfg.encoder_hidden}] + pred [{mcfg.joint.dim}, {mcfg.predictor_hidden}], "
          f"{mcfg.joint.activation}, out [{mcfg.n_out}, {mcfg.joint.dim}] (blank {mcfg.blank} last"
          + (f", big blanks {mcfg.big_blank_durations}" if mcfg.big_blank_durations else "") + ")")
    if cfg.get("tokenizer"):
        print(f"mapped  vocabulary: {mcfg.vocab_size} SentencePiece pieces ({cfg['tokenizer'].get('type')}; '\u2581' "
              f"marks a word start, as in FORMAT.md), max_symbols {mcfg.max_symbols}")
    else:
        print(f"mapped  vocabulary: {mcfg.vocab_size} labels (' ' -> '\u2581'), max_symbols {mcfg.max_symbols}")
    for n in notes:
        print(f"checked {n}")
    print("checked model directory reloads through the loader's checks (shapes, names, finite values, tokens)")
    print("verified against NeMo's modules rebuilt with torch (nn.LSTM proj_size, nn.LayerNorm), float64, random "
          "input: " + ", ".join(f"{k} max |diff| {v:.2g}" for k, v in diffs.items()))
    # float64 all through, the only differences are the fp32 storage of the folded weights (~1e-7 relative)
    bad = {k: v for k, v in diffs.items() if not v < 1e-4}
    if bad:
        print(f"rnntd_import.nemo: error: verification failed: {bad}", file=sys.stderr)
        return 1
    print(f"wrote   {a.outdir} ({sum(t.numel() for t in state.values()):,} parameters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
