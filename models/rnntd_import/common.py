"""What the importers share: the error type, checkpoint loading, LSTM stacks read from torch.nn.LSTM
names, the verification of a converted model against the source tensors, and writing the directory."""
import os
import re
import shutil
import tempfile

import numpy as np
import torch

from rnntd_ref.io import load_model, save_model
from rnntd_ref.model import RNNTModel


class CheckpointError(ValueError):
    """A checkpoint the importer cannot convert exactly; the message names the key or setting."""


def load_torch(path):
    """torch.load without running arbitrary pickled code (weights_only) where this torch has it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # a torch without weights_only
        return torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any unreadable file is the user's input error
        raise CheckpointError(f"{path}: not a readable PyTorch checkpoint ({type(e).__name__}: {str(e).splitlines()[0][:200]})")


_LSTM_KEY = re.compile(r"^(weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)_l(\d+)(_reverse)?$")


def lstm_stack(sd, prefix, where, proj=False):
    """The layers of a torch.nn.LSTM saved under `prefix` (e.g. 'encoder.pre_rnn.lstm.'):
    [(weight_ih, weight_hh, bias_ih, bias_hh)] in layer order, with proj=True
    [(weight_ih, weight_hh, bias_ih, bias_hh, weight_hr or None)] (torch's proj_size). Bidirectional
    LSTMs, projections where proj is False and missing biases are errors naming the key."""
    layers = {}
    for k, v in sd.items():
        if not k.startswith(prefix):
            continue
        m = _LSTM_KEY.match(k[len(prefix):])
        if not m:
            raise CheckpointError(f"{where}: {k}: unexpected tensor in an LSTM")
        if m.group(3):
            raise CheckpointError(f"{where}: {k}: bidirectional LSTMs are not supported (rnntd decodes causally)")
        if m.group(1) == "weight_hr" and not proj:
            raise CheckpointError(f"{where}: {k}: LSTMs with proj_size are not supported by this importer")
        layers.setdefault(int(m.group(2)), {})[m.group(1)] = v
    if not layers:
        raise CheckpointError(f"{where}: no tensors {prefix}weight_ih_l0 ...: missing LSTM")
    out = []
    for i in range(len(layers)):
        if i not in layers:
            raise CheckpointError(f"{where}: {prefix}weight_ih_l{i}: missing (layers {sorted(layers)})")
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            if name not in layers[i]:
                raise CheckpointError(f"{where}: {prefix}{name}_l{i}: missing")
        L = layers[i]
        H = L["bias_ih"].shape[0] // 4
        R = L["weight_hr"].shape[0] if "weight_hr" in L else H
        shapes = [("weight_ih", (4 * H, L["weight_ih"].shape[1])), ("weight_hh", (4 * H, R)), ("bias_ih", (4 * H,)),
                  ("bias_hh", (4 * H,))] + ([("weight_hr", (R, H))] if "weight_hr" in L else [])
        for name, shape in shapes:
            if tuple(L[name].shape) != shape:
                raise CheckpointError(f"{where}: {prefix}{name}_l{i}: shape {list(L[name].shape)}, expected {list(shape)}")
        t = (L["weight_ih"], L["weight_hh"], L["bias_ih"], L["bias_hh"])
        out.append(t + (L.get("weight_hr"),) if proj else t)
    return out


def check_finite(sd, where):
    for k, v in sd.items():
        if torch.is_tensor(v) and v.is_floating_point() and not torch.isfinite(v).all():
            raise CheckpointError(f"{where}: {k}: holds non-finite values")


def reference_lstm(layers, x):
    """torch.nn.LSTM (soft activations) over x [T, I] with the given layers, float64 -> [T, H]."""
    for w_ih, w_hh, b_ih, b_hh in layers:
        lstm = torch.nn.LSTM(w_ih.shape[1], w_hh.shape[1]).double()
        with torch.no_grad():
            lstm.weight_ih_l0.copy_(w_ih)
            lstm.weight_hh_l0.copy_(w_hh)
            lstm.bias_ih_l0.copy_(b_ih)
            lstm.bias_hh_l0.copy_(b_hh)
            x, _ = lstm(x.double()[:, None, :])
        x = x[:, 0, :]
    return x


def predictor_outputs(model, labels):
    """The converted model's predictor outputs from its start state and after each of labels: [1 + n, Hp]."""
    g, st = model.predictor_init()
    gs = [g]
    for y in labels:
        g, st = model.predictor_step(y, st)
        gs.append(g)
    return torch.stack(gs)


def write_model(cfg, state, tokens, outdir, force=False):
    """Build the RNNTModel, write it to a temporary directory beside outdir, read it back through the
    loader's checks, then move it into place. Returns (model in float64, the reloaded model)."""
    model = RNNTModel(cfg)
    missing = set(model.state_dict()) - set(state)
    extra = set(state) - set(model.state_dict())
    if missing or extra:
        raise CheckpointError(f"internal: tensors missing {sorted(missing)[:3]} / extra {sorted(extra)[:3]}")
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=True)
    model.eval()
    if os.path.exists(outdir):
        if not force:
            raise CheckpointError(f"{outdir}: exists (use --force to replace it)")
        if not os.path.isfile(os.path.join(outdir, "model.yaml")):
            raise CheckpointError(f"{outdir}: exists and is not a model directory; not replacing it")
    parent = os.path.dirname(os.path.abspath(outdir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".rnntd-import-", dir=parent)
    try:
        save_model(model, tokens, tmp)
        reloaded, _ = load_model(tmp, dtype=torch.float64)
        if os.path.exists(outdir):
            shutil.rmtree(outdir)
        os.rename(tmp, outdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return reloaded


def max_abs(a, b):
    return float((torch.as_tensor(a).double() - torch.as_tensor(b).double()).abs().max()) if torch.as_tensor(a).numel() else 0.0


def check_featurizer(sd, prefix, fe, where, notes):
    """The featurizer's buffers (`{prefix}fb`, `{prefix}window`), where the checkpoint carries them, must
    be what FORMAT.md computes for the frontend fe; appends what was verified to notes."""
    fb = sd.get(prefix + "fb")
    if fb is None:
        return
    from rnntd_ref.audio_frontend import _mel_filterbank, _window
    ours = _mel_filterbank(fe, torch.float64).T
    if tuple(fb.shape[-2:]) != tuple(ours.shape):
        raise CheckpointError(f"{where}: {prefix}fb: shape {list(fb.shape)}, expected [1, {ours.shape[0]}, "
                              f"{ours.shape[1]}] for these settings")
    d = max_abs(fb.reshape(ours.shape), ours)
    if d > 1e-6:
        raise CheckpointError(f"{where}: {prefix}fb: differs from the slaney filterbank by {d:.3g}")
    notes.append(f"featurizer.fb {list(fb.shape)} = our slaney filterbank (max |diff| {d:.2g})")
    w = sd.get(prefix + "window")
    if w is not None:
        dw = max_abs(w, _window(fe, torch.float64))
        if w.shape[0] != fe.win_length or dw > 1e-6:
            raise CheckpointError(f"{where}: {prefix}window: not a symmetric {fe.window} window of {fe.win_length}")
        notes.append(f"featurizer.window [{w.shape[0]}] = symmetric {fe.window} (max |diff| {dw:.2g})")


def random_input(rng, T, D):
    return torch.from_numpy(rng.standard_normal((T, D))).double()


__all__ = ["CheckpointError", "check_featurizer", "load_torch", "predictor_outputs", "lstm_stack", "check_finite", "reference_lstm", "write_model", "max_abs",
           "random_input", "np"]
