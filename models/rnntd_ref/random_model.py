"""Random-weight models of any architecture, with output biases tuned to chosen decoding rates.

    python3 -m rnntd_ref.random_model --preset tiny|small|mlperf --seed N --out DIR
        [--big-blanks 2,4,8] [--activation hard|soft] [--label-rate 0.2 --blank-rate 0.5 --big-rates ...]
        [--samples N --frames T]

Weights are uniform in +-1/sqrt(H) for LSTMs and +-1/sqrt(fan_in) for linear layers (PyTorch's defaults),
the embedding is N(0, 1). They come from numpy's PCG64 generator and are rounded to float32, so a seed
gives the same bytes on every machine and torch version. The output biases are then calibrated: on joint
inputs sampled from random normalised features and random label histories, the share of argmaxes that
fall on any label, on the blank and on each big blank is brought to the requested rates by damped
log-ratio updates of the biases of each group (labels move together, keeping their random spread).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

from .config import (EncoderConfig, FrontendConfig, JointConfig, LayerConfig, ModelConfig, PredictorConfig,
                     mb_output, validate)
from .decode import greedy_decode
from .model import RNNTModel

CHAR_TOKENS = ["\u2581", "'"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]

PRESETS = {
    # For tests: every size small and not a multiple of 8.
    "tiny": dict(feature_dim=6, frame_stacking=2, encoder_hidden=[20, 20], time_stacks=[2, 1],
                 embedding=10, predictor_hidden=[14], joint_dim=18, joint_activation="relu",
                 vocab_size=9, big_blank_durations=[2, 4, 8], max_symbols=5),
    # A model a CPU decodes quickly, with the real feature width and alphabet.
    "small": dict(feature_dim=80, frame_stacking=3, encoder_hidden=[320, 320, 320], time_stacks=[1, 2, 1],
                  embedding=64, predictor_hidden=[320], joint_dim=320, joint_activation="relu",
                  vocab_size=28, big_blank_durations=[2, 4, 8], max_symbols=10),
    # The MLPerf RNN-T shape: 2x1024, stack x2, 3x1024; predictor 320 + 2x320; joint 512.
    "mlperf": dict(feature_dim=80, frame_stacking=3, encoder_hidden=[1024] * 5, time_stacks=[1, 2, 1, 1, 1],
                   embedding=320, predictor_hidden=[320, 320], joint_dim=512, joint_activation="relu",
                   vocab_size=28, big_blank_durations=[2, 4, 8], max_symbols=30),
}


def build_config(name="random", feature_dim=80, frame_stacking=1, encoder_hidden=(64,), time_stacks=None,
                 embedding=32, predictor_hidden=(64,), joint_dim=64, joint_activation="relu", vocab_size=28,
                 big_blank_durations=(), max_symbols=10, lstm_activation="hard", normalize="global",
                 projs=None, layer_norms=None):
    """A validated ModelConfig; layer input sizes follow from the chain rules of FORMAT.md. projs /
    layer_norms: per encoder layer, a projection size (0 = none) and whether it has a LayerNorm."""
    time_stacks = list(time_stacks or [1] * len(encoder_hidden))
    projs = list(projs or [0] * len(encoder_hidden))
    layer_norms = list(layer_norms or [False] * len(encoder_hidden))
    if not len(time_stacks) == len(projs) == len(layer_norms) == len(encoder_hidden):
        raise ValueError("time_stacks, projs and layer_norms need one entry per encoder layer")
    enc, inp = [], feature_dim * frame_stacking
    for h, s, p, ln in zip(encoder_hidden, time_stacks, projs, layer_norms):
        enc.append(LayerConfig(input=inp, hidden=h, time_stack=s, proj=p, layer_norm=bool(ln)))
        inp = enc[-1].out * s
    pred, inp = [], embedding
    for h in predictor_hidden:
        pred.append(LayerConfig(input=inp, hidden=h))
        inp = h
    cfg = ModelConfig(
        name=name, frontend=FrontendConfig(n_mels=feature_dim, normalize=normalize),
        feature_dim=feature_dim, frame_stacking=frame_stacking, lstm_activation=lstm_activation,
        encoder=EncoderConfig(enc), predictor=PredictorConfig(embedding=embedding, layers=pred),
        joint=JointConfig(dim=joint_dim, activation=joint_activation), vocab_size=vocab_size,
        big_blank_durations=list(big_blank_durations), max_symbols=max_symbols)
    return validate(cfg)


def preset_config(preset, **overrides):
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (have {', '.join(PRESETS)})")
    args = dict(PRESETS[preset])
    args.update(overrides)
    args.setdefault("name", f"random-{preset}")
    return build_config(**args)


def default_tokens(vocab_size):
    """The character alphabet for V <= 28, extended with distinct word-piece-like tokens beyond."""
    if vocab_size <= len(CHAR_TOKENS):
        return CHAR_TOKENS[:vocab_size]
    return CHAR_TOKENS + [f"\u2581w{i}" for i in range(vocab_size - len(CHAR_TOKENS))]


def _uniform(rng, shape, bound):
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def randomize_(model, rng, weight_scale=1.0):
    """Fill every parameter and buffer from rng (numpy Generator), in name order. weight_scale multiplies
    the LSTM and joint weights (larger values drive hard activations into their clamps)."""
    sd = model.state_dict()
    new = {}
    for name in sorted(sd):
        shape = tuple(sd[name].shape)
        if name == "frontend.mean":
            a = rng.uniform(-8.0, 2.0, size=shape).astype(np.float32)  # log-mel-like offsets
        elif name == "frontend.std":
            a = rng.uniform(0.5, 3.0, size=shape).astype(np.float32)
        elif name == "predictor.embedding":
            a = rng.standard_normal(size=shape).astype(np.float32)
        elif name.endswith(".norm.weight"):  # LayerNorm gains around 1
            a = rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
        elif name.endswith(".norm.bias"):
            a = rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)
        elif name.endswith(".weight_hr"):
            a = _uniform(rng, shape, weight_scale / math.sqrt(shape[1]))
        elif ".lstm." in name:
            H = shape[0] // 4
            a = _uniform(rng, shape, weight_scale / math.sqrt(H))
        else:  # joint.{enc,pred,out}.{weight,bias}
            fan_in = sd[name.replace(".bias", ".weight")].shape[1]
            a = _uniform(rng, shape, weight_scale / math.sqrt(fan_in))
        new[name] = torch.from_numpy(a)
    model.load_state_dict(new, strict=True)
    return model


def random_features(model, rng, frames):
    """Raw features [frames, F] float32 whose normalised version is N(0, 1)."""
    z = rng.standard_normal(size=(frames, model.cfg.feature_dim))
    if model.cfg.frontend.normalize == "global":
        z = z * model.frontend.std.detach().double().numpy() + model.frontend.mean.detach().double().numpy()
    return z.astype(np.float32)


# ---------------------------------------------------------------- rate calibration


def groups(cfg):
    """Names of the output groups and the joint indices in each: 'label', 'big{d}' per duration, 'blank'."""
    V = cfg.vocab_size
    out = {"label": list(range(V))}
    for i, d in enumerate(cfg.big_blank_durations):
        out[f"big{d}"] = [mb_output(V, cfg.big_blank_durations, i)]
    out["blank"] = [V + cfg.n_big]
    return out


def target_rates(cfg, label_rate=0.2, blank_rate=None, big_rates=None):
    """Fill in defaults: with big blanks, blank 0.5 and the rest shared equally; without, blank = 1 - label."""
    n = cfg.n_big
    if n == 0:
        if big_rates:
            raise ValueError("big_rates given for a model without big blanks")
        if blank_rate is None:
            blank_rate = 1.0 - label_rate
        rates = {"label": label_rate, "blank": blank_rate}
    else:
        if blank_rate is None:
            blank_rate = 0.5 if big_rates is None else 1.0 - label_rate - sum(big_rates)
        if big_rates is None:
            big_rates = [(1.0 - label_rate - blank_rate) / n] * n
        if len(big_rates) != n:
            raise ValueError(f"need {n} big-blank rates, got {len(big_rates)}")
        rates = {"label": label_rate}
        rates.update({f"big{d}": r for d, r in zip(cfg.big_blank_durations, big_rates)})
        rates["blank"] = blank_rate
    if any(r <= 0 for r in rates.values()) or abs(sum(rates.values()) - 1.0) > 1e-6:
        raise ValueError(f"rates must be positive and sum to 1, got {rates}")
    return rates


def _q(x, bits=8):
    """x rounded to `bits` significant bits (exact in float32): platform noise in the statistics below
    then almost never reaches the stored bytes."""
    x = np.asarray(x, dtype=np.float64)
    e = np.floor(np.log2(np.abs(x))).astype(np.int64)
    return np.ldexp(np.round(np.ldexp(x, -e + bits)), e - bits)


def _calibration_data(model, rng, n_utts, frames, label_len):
    with torch.no_grad():
        feats = np.stack([random_features(model, rng, frames) for _ in range(n_utts)])
        f, _ = model.encode_batch(feats, [frames] * n_utts)  # equal lengths: no padding involved
        fs = [x.double() for x in f]
        labels = torch.from_numpy(rng.integers(0, model.cfg.vocab_size, size=(n_utts, label_len)))
        g = model.predictor(labels).reshape(-1, model.cfg.predictor_hidden).double()
    return fs, g


def standardize_joint_(model, fs, g, pred_share=0.7):
    """Data-dependent scaling of the joint projections: every unit of W_enc f (over encoder frames of
    random input) gets mean 0 and std 1, every unit of W_pred g (over predictor outputs after random
    labels) mean 0 and std pred_share. Random LSTMs barely move their outputs over time, and without
    this the argmax would hardly depend on the frame; with it, the decisions vary with f and g."""
    f = torch.cat(fs)
    with torch.no_grad():
        for lin, data, a in ((model.joint.enc, f, 1.0), (model.joint.pred, g, pred_share)):
            W = lin.weight.detach().double()
            p = data @ W.t()
            scale = torch.from_numpy(_q(a / p.std(0).clamp_min(1e-8).numpy()))
            shift = np.round((-p.mean(0) * scale).numpy() * 4096) / 4096
            lin.weight.copy_((W * scale[:, None]).float())
            lin.bias.copy_(torch.from_numpy(shift).float())


class _DecodeSim:
    """FORMAT.md stage 6 in numpy, all calibration utterances in lockstep, for bias calibration (many
    decodings with different output biases). The projected encoder frames are fixed; predictor outputs
    are cached by label history and computed in batches."""

    def __init__(self, model, fs):
        self.cfg = model.cfg
        j = model.joint
        with torch.no_grad():
            fp = [(f.double() @ j.enc.weight.double().t() + j.enc.bias.double()).numpy() for f in fs]
        self.T = np.array([x.shape[0] for x in fp])
        self.fp = np.zeros((len(fp), max(1, self.T.max()), fp[0].shape[1]))
        for i, x in enumerate(fp):
            self.fp[i, :x.shape[0]] = x
        self.Wp = j.pred.weight.detach().double().numpy()
        self.bp = j.pred.bias.detach().double().numpy()
        self.Wo = j.out.weight.detach().double().numpy()
        self.relu = j.activation == "relu"
        self.model = model
        with torch.no_grad():
            g, st = model.predictor_init()
        self.cache = {(): (g.double().numpy() @ self.Wp.T + self.bp, st)}

    def _extend(self, pairs):
        """Cache the predictor outputs of histories parent + (k,) for (parent, k) in pairs."""
        todo = sorted({(h, k) for h, k in pairs if h + (k,) not in self.cache})
        if not todo:
            return
        states = [self.cache[h][1] for h, _ in todo]
        state = [(torch.stack([s[l][0] for s in states]), torch.stack([s[l][1] for s in states]))
                 for l in range(len(states[0]))]
        with torch.no_grad():
            g, new = self.model.predictor.step(torch.tensor([k for _, k in todo]), state)
        gp = g.double().numpy() @ self.Wp.T + self.bp
        for i, (h, k) in enumerate(todo):
            self.cache[h + (k,)] = (gp[i], [(hh[i], cc[i]) for hh, cc in new])

    def counts(self, b):
        """Joint evaluations per output index when decoding every utterance with output bias b."""
        cfg = self.cfg
        V, blank = cfg.vocab_size, cfg.blank
        dur = np.array([cfg.big_blank_duration(k) if k >= V else 0 for k in range(cfg.n_out)])
        n_out = np.zeros(cfg.n_out, dtype=np.int64)
        B = len(self.T)
        t = np.zeros(B, dtype=np.int64)
        here = np.zeros(B, dtype=np.int64)
        hist = [()] * B
        while True:
            act = np.nonzero(t < self.T)[0]
            if act.size == 0:
                return n_out
            gp = np.stack([self.cache[hist[i]][0] for i in act])
            h = self.fp[act, t[act]] + gp
            h = np.maximum(h, 0.0) if self.relu else np.tanh(h)
            k = np.argmax(h @ self.Wo.T + b, axis=1)
            np.add.at(n_out, k, 1)
            lab = k < V
            here[act] = np.where(lab, here[act] + 1, 0)
            step = np.where(lab, 0, np.where(k == blank, 1, dur[k]))
            capped = lab & (here[act] == cfg.max_symbols)
            step[capped] = 1
            here[act[capped]] = 0
            t[act] += step
            emit = [(int(i), int(kk)) for i, kk, l in zip(act, k, lab) if l]
            self._extend([(hist[i], kk) for i, kk in emit])
            for i, kk in emit:
                hist[i] = hist[i] + (kk,)


def _shares(n_out, cfg):
    total = max(1, int(n_out.sum()))
    return {name: float(n_out[idx].sum()) / total for name, idx in groups(cfg).items()}


def calibrate_output_bias(model, rates, fs, iters=60, tol=0.01, quantum=2.0 ** -12):
    """Shift joint.out.bias group by group until greedy decoding of the calibration utterances fs
    (encoder outputs) chooses each group at its rate. The shares respond to the biases in jumps (a label
    that starts a run of max_symbols labels), so the steps are Rprop's: each group moves by its own step
    in the direction of its error; the step grows by 1.2 while the direction holds and halves when it
    flips. Returns the achieved shares of the best biases seen. The bias ends on a multiple of
    `quantum` (exact in float32) for reproducible bytes."""
    cfg = model.cfg
    sim = _DecodeSim(model, fs)
    b = model.joint.out.bias.detach().double().numpy().copy()
    grp = groups(cfg)
    step = {g: 0.25 for g in grp}
    last = {g: 0 for g in grp}
    best, best_err = b.copy(), float("inf")
    for _ in range(iters):
        achieved = _shares(sim.counts(b), cfg)
        err = max(abs(achieved[g] - rates[g]) for g in grp)
        if err < best_err:
            best, best_err = b.copy(), err
        if err <= tol:
            break
        for g, idx in grp.items():
            d = rates[g] - achieved[g]
            sign = (d > 0) - (d < 0)
            if sign * last[g] < 0:
                step[g] *= 0.5
            elif sign == last[g]:
                step[g] *= 1.2
            last[g] = sign
            b[idx] += sign * step[g]
    b = np.round(best / quantum) * quantum
    with torch.no_grad():
        model.joint.out.bias.copy_(torch.from_numpy(b).float())
    return _shares(sim.counts(model.joint.out.bias.detach().double().numpy()), cfg)


def decode_rates(model, feats_list):
    """Shares of the decoder's joint evaluations that chose a label, the blank, each big blank."""
    cfg = model.cfg
    names = {}
    for name, idx in groups(cfg).items():
        for k in idx:
            names[k] = name
    counts = {name: 0 for name in groups(cfg)}
    for x in feats_list:
        greedy_decode(model, x, on_step=lambda t, u, z, k: counts.__setitem__(names[k], counts[names[k]] + 1))
    total = sum(counts.values())
    return {name: (c / total if total else 0.0) for name, c in counts.items()}, counts


def random_model(cfg, seed=0, label_rate=0.2, blank_rate=None, big_rates=None, weight_scale=1.0,
                 pred_share=1.0, calibrate=True, calib_utts=128, calib_frames=None, calib_iters=60, tol=0.01):
    """A model with random weights for cfg. Returns (model, achieved decoding shares or None).
    Calibration decodes calib_utts random utterances of calib_frames frames (default: 40 encoder
    frames each) and adjusts the output biases until each group's share is within tol of its rate."""
    rng = np.random.default_rng(seed)
    model = RNNTModel(cfg)
    randomize_(model, rng, weight_scale)
    model.eval()
    if not calibrate:
        return model, None
    rates = target_rates(cfg, label_rate, blank_rate, big_rates)
    frames = calib_frames or 40 * cfg.subsampling
    fs, g = _calibration_data(model, rng, calib_utts, frames, label_len=24)
    standardize_joint_(model, fs, g, pred_share)
    achieved = calibrate_output_bias(model, rates, fs, iters=calib_iters, tol=tol)
    return model, achieved


def _rates_line(rates):
    return " ".join(f"{k}={v:.3f}" for k, v in rates.items())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m rnntd_ref.random_model", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--name", help="model name (default random-<preset>)")
    ap.add_argument("--big-blanks", help="durations, e.g. 2,4,8; empty or 'none' for plain RNN-T")
    ap.add_argument("--activation", choices=["hard", "soft"], default="hard")
    ap.add_argument("--joint-activation", choices=["relu", "tanh"])
    ap.add_argument("--normalize", choices=["global", "none"], default="global")
    ap.add_argument("--max-symbols", type=int)
    ap.add_argument("--label-rate", type=float, default=0.2)
    ap.add_argument("--blank-rate", type=float)
    ap.add_argument("--big-rates", help="one rate per big blank, e.g. 0.1,0.1,0.1")
    ap.add_argument("--weight-scale", type=float, default=1.0)
    ap.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    ap.add_argument("--calib-utts", type=int, help="calibration utterances (default 128; 32 for mlperf)")
    ap.add_argument("--samples", type=int, default=0, help="also write N random feature files to OUT/samples/")
    ap.add_argument("--frames", type=int, default=300, help="frames per sample")
    ap.add_argument("--no-decode-check", action="store_true", help="skip decoding the samples")
    args = ap.parse_args(argv)

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    over = dict(lstm_activation=args.activation, normalize=args.normalize)
    if args.name:
        over["name"] = args.name
    if args.big_blanks is not None:
        s = args.big_blanks.strip()
        over["big_blank_durations"] = [] if s in ("", "none") else [int(v) for v in s.split(",")]
    if args.joint_activation:
        over["joint_activation"] = args.joint_activation
    if args.max_symbols:
        over["max_symbols"] = args.max_symbols
    try:
        cfg = preset_config(args.preset, **over)
        big_rates = [float(v) for v in args.big_rates.split(",")] if args.big_rates else None
        calib_utts = args.calib_utts or (32 if args.preset == "mlperf" else 128)
        model, achieved = random_model(cfg, args.seed, args.label_rate, args.blank_rate, big_rates,
                                       args.weight_scale, calib_utts=calib_utts)
    except ValueError as e:
        print(f"random_model: {e}", file=sys.stderr)
        return 2
    from .io import save_model  # late: io imports model, keep the CLI import light
    tokens = default_tokens(cfg.vocab_size)
    save_model(model, tokens, args.out, dtype=args.dtype, metadata={"seed": str(args.seed)})
    n_params = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {cfg.name}, {n_params} parameters, {cfg.lstm_activation} LSTMs, "
          f"big blanks {cfg.big_blank_durations}")
    print(f"target rates:      {_rates_line(target_rates(cfg, args.label_rate, args.blank_rate, big_rates))}")
    print(f"calibration rates: {_rates_line(achieved)}")
    if args.samples:
        rng = np.random.default_rng(args.seed + 1_000_003)
        sdir = os.path.join(args.out, "samples")
        os.makedirs(sdir, exist_ok=True)
        feats = []
        for i in range(args.samples):
            x = random_features(model, rng, args.frames)
            np.save(os.path.join(sdir, f"sample{i:03d}.npy"), np.ascontiguousarray(x))
            feats.append(x)
        print(f"wrote {args.samples} samples of {args.frames} frames to {sdir}")
        if not args.no_decode_check:
            rates, counts = decode_rates(model, feats)
            print(f"decoded rates:     {_rates_line(rates)} (joint evaluations: {sum(counts.values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
