"""Model directories (FORMAT.md): load with the C loader's checks, save, and export foreign state dicts."""
import os
import re

import numpy as np
import torch

from .config import load_config, save_config, validate
from .model import RNNTModel
from .safetensors_io import read_safetensors, write_safetensors

MODEL_YAML = "model.yaml"
WEIGHTS = "weights.safetensors"
TOKENS = "tokens.txt"
MAX_TOKEN_BYTES = 64


# ---------------------------------------------------------------- weights


def expected_shapes(cfg):
    """name -> shape of every tensor weights.safetensors must hold for cfg, in FORMAT.md's table order."""
    shapes = {}
    if cfg.frontend.normalize == "global":
        shapes["frontend.mean"] = (cfg.feature_dim,)
        shapes["frontend.std"] = (cfg.feature_dim,)
    for part, layers in (("encoder", cfg.encoder.layers), ("predictor", cfg.predictor.layers)):
        if part == "predictor":
            shapes["predictor.embedding"] = (cfg.vocab_size + 1, cfg.predictor.embedding)
        for i, layer in enumerate(layers):
            H, R = layer.hidden, layer.out
            shapes[f"{part}.lstm.{i}.weight_ih"] = (4 * H, layer.input)
            shapes[f"{part}.lstm.{i}.weight_hh"] = (4 * H, R)
            shapes[f"{part}.lstm.{i}.bias_ih"] = (4 * H,)
            shapes[f"{part}.lstm.{i}.bias_hh"] = (4 * H,)
            if layer.proj:
                shapes[f"{part}.lstm.{i}.weight_hr"] = (R, H)
            if layer.layer_norm:
                shapes[f"{part}.lstm.{i}.norm.weight"] = (R,)
                shapes[f"{part}.lstm.{i}.norm.bias"] = (R,)
    J = cfg.joint.dim
    shapes["joint.enc.weight"] = (J, cfg.encoder_hidden)
    shapes["joint.enc.bias"] = (J,)
    shapes["joint.pred.weight"] = (J, cfg.predictor_hidden)
    shapes["joint.pred.bias"] = (J,)
    shapes["joint.out.weight"] = (cfg.n_out, J)
    shapes["joint.out.bias"] = (cfg.n_out,)
    return shapes


def check_weights(cfg, tensors, where=WEIGHTS):
    """Every expected tensor present with its shape, nothing else, all finite, std > 0 (FORMAT.md)."""
    shapes = expected_shapes(cfg)
    for name in tensors:
        if name not in shapes:
            raise ValueError(f"{where}: unexpected tensor {name!r}")
    for name, shape in shapes.items():
        if name not in tensors:
            raise ValueError(f"{where}: missing tensor {name!r}")
        a = np.asarray(tensors[name].detach().cpu() if hasattr(tensors[name], "detach") else tensors[name])
        if tuple(a.shape) != shape:
            raise ValueError(f"{where}: tensor {name!r} has shape {list(a.shape)}, expected {list(shape)}")
        if a.dtype.kind != "f":
            raise ValueError(f"{where}: tensor {name!r} has dtype {a.dtype}, expected a float type")
        if not np.isfinite(a).all():
            raise ValueError(f"{where}: tensor {name!r} has non-finite values")
    if "frontend.std" in shapes:
        std = np.asarray(tensors["frontend.std"].detach().cpu() if hasattr(tensors["frontend.std"], "detach")
                         else tensors["frontend.std"])
        if not (std > 0).all():
            raise ValueError(f"{where}: tensor 'frontend.std' has entries <= 0")


# ---------------------------------------------------------------- tokens


def check_tokens(tokens, vocab_size, where=TOKENS):
    if len(tokens) != vocab_size:
        raise ValueError(f"{where}: {len(tokens)} tokens, vocab_size is {vocab_size}")
    seen = {}
    for i, tok in enumerate(tokens):
        line = i + 1
        if not isinstance(tok, str) or tok == "":
            raise ValueError(f"{where}:{line}: empty token")
        if len(tok.encode("utf-8")) > MAX_TOKEN_BYTES:
            raise ValueError(f"{where}:{line}: token longer than {MAX_TOKEN_BYTES} bytes")
        if any(ord(ch) < 0x20 or ch == "\x7f" for ch in tok):
            raise ValueError(f"{where}:{line}: token contains a control character")
        if " " in tok:
            raise ValueError(f"{where}:{line}: token contains a space (write a space as \u2581)")
        if tok in seen:
            raise ValueError(f"{where}:{line}: token {tok!r} duplicates line {seen[tok]}")
        seen[tok] = line
    return tokens


def read_tokens(path, vocab_size):
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 (byte {e.start})") from None
    if "\r" in text:
        line = text[:text.index("\r")].count("\n") + 1
        raise ValueError(f"{path}:{line}: carriage return (\\r) in tokens file")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return check_tokens(lines, vocab_size, where=str(path))


def write_tokens(path, tokens):
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(t + "\n" for t in tokens))


# ---------------------------------------------------------------- model directories


def load_model(directory, dtype=torch.float32):
    """Read a model directory -> (RNNTModel in eval mode, token list). Validates like the C loader:
    config rules, exact tensor names and shapes, finite values, std > 0, the tokens file."""
    cfg = load_config(os.path.join(directory, MODEL_YAML))
    wpath = os.path.join(directory, WEIGHTS)
    tensors, _ = read_safetensors(wpath)
    check_weights(cfg, tensors, where=wpath)
    tokens = read_tokens(os.path.join(directory, TOKENS), cfg.vocab_size)
    model = RNNTModel(cfg)
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))
                           for k, v in tensors.items()}, strict=True)
    return model.to(dtype).eval(), tokens


def save_model(model, tokens, directory, dtype="F32", metadata=None):
    """Write model.yaml, weights.safetensors (dtype F32, F16 or BF16) and tokens.txt into directory."""
    cfg = model.cfg
    validate(cfg)
    check_tokens(list(tokens), cfg.vocab_size)
    sd = {k: v.detach().cpu().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    check_weights(cfg, sd, where="state_dict")
    os.makedirs(directory, exist_ok=True)
    save_config(cfg, os.path.join(directory, MODEL_YAML))
    meta = {"format": "rnntd", "version": "1"}
    meta.update(metadata or {})
    write_safetensors(os.path.join(directory, WEIGHTS), sd, meta, float_dtype=dtype)
    write_tokens(os.path.join(directory, TOKENS), tokens)


_NN_LSTM = re.compile(r"^(encoder|predictor)\.lstm\.(weight_ih|weight_hh|bias_ih|bias_hh)_l(\d+)$")


def convert_state_dict(cfg, state_dict):
    """Map a state dict to FORMAT.md names. Accepts our names, and for the LSTM stacks torch.nn.LSTM's
    names under `encoder.lstm.` / `predictor.lstm.` (weight_ih_l0, bias_hh_l1, ...): nn.LSTM uses the
    same gate order (i, f, g, o) and the same two biases, so only names change. An nn.Embedding's
    `predictor.embedding.weight` is accepted for `predictor.embedding`."""
    out = {}
    for name, value in state_dict.items():
        m = _NN_LSTM.match(name)
        if m:
            new = f"{m.group(1)}.lstm.{int(m.group(3))}.{m.group(2)}"
        elif name == "predictor.embedding.weight":
            new = "predictor.embedding"
        elif re.search(r"_reverse$", name):
            raise ValueError(f"{name}: bidirectional LSTMs are not part of the format")
        elif re.search(r"\.weight_hr_l\d+$", name):
            raise ValueError(f"{name}: LSTMs with proj_size are not part of the format")
        else:
            new = name
        if new in out:
            raise ValueError(f"{name}: gives {new!r} twice")
        out[new] = torch.as_tensor(value).detach().cpu().to(torch.float32)
    check_weights(cfg, out, where="state_dict")
    return out


def export_state_dict(cfg, state_dict, tokens, directory, dtype="F32"):
    """Write a model directory from a config and a state dict (see convert_state_dict). Returns the model."""
    validate(cfg)
    model = RNNTModel(cfg)
    model.load_state_dict(convert_state_dict(cfg, state_dict), strict=True)
    save_model(model, tokens, directory, dtype=dtype)
    return model
