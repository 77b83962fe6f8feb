"""Golden files: what the reference computes for tiny random models, stage by stage, for the C tests.

    python3 -m rnntd_ref.golden --out tests/data/golden [--case NAME ...]

For each case, <out>/<case>/ holds the model (model.yaml, weights.safetensors, tokens.txt), the inputs
(utt{b}.npy, float32 [T, F], C order) and golden.safetensors (schema in <out>/README.md). The model is
written first and read back, and everything is computed in float64 from the stored (float32, float16 or
bfloat16) weights and the float32 inputs, then stored as F32.

A case is only accepted when its decoding exercises what it is meant to (labels, blanks, every big
blank, the max_symbols cap where asked) and every argmax the decoder took wins by a margin that fp32
arithmetic cannot overturn; otherwise the next seed is tried. Everything is deterministic: the same
command writes the same bytes (tests/models/test_golden.py holds the committed files to that).
"""
import argparse
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import torch

from .decode import greedy_decode
from .io import load_model, save_model
from .npy import save_npy
from .random_model import build_config, default_tokens, random_features, random_model
from .safetensors_io import write_safetensors

MIN_MARGIN = 1e-3   # smallest top-1 minus top-2 logit gap accepted at any decoding step
MAX_TU = 40         # joint rows stored per utterance
LENGTHS = [0, 1, 2, 7, 13, 30, 61]  # 0, 1, odd and not divisible by any stacking, ~60


@dataclass
class Case:
    name: str
    about: str
    config: dict
    seed: int
    label_rate: float
    blank_rate: Optional[float] = None
    big_rates: Optional[List[float]] = None
    weight_scale: float = 1.0
    dtype: str = "F32"
    need_cap: bool = False
    lengths: List[int] = field(default_factory=lambda: list(LENGTHS))


CASES = [
    Case("hard_bb",
         "hard LSTMs, big blanks [2,4,8], frame stacking 2, time_stack 2 after encoder layer 0, "
         "global normalisation, 2 predictor layers, relu joint",
         dict(feature_dim=7, frame_stacking=2, encoder_hidden=[20, 18], time_stacks=[2, 1], embedding=11,
              predictor_hidden=[14, 13], joint_dim=19, joint_activation="relu", vocab_size=9,
              big_blank_durations=[2, 4, 8], max_symbols=4, lstm_activation="hard", normalize="global"),
         seed=107, label_rate=0.3, blank_rate=0.4, weight_scale=2.5),
    Case("soft_plain",
         "soft LSTMs, no big blanks, no time stacking, no normalisation, frame stacking 1",
         dict(feature_dim=9, frame_stacking=1, encoder_hidden=[13, 15], time_stacks=[1, 1], embedding=7,
              predictor_hidden=[12], joint_dim=10, joint_activation="relu", vocab_size=5,
              big_blank_durations=[], max_symbols=3, lstm_activation="soft", normalize="none"),
         seed=201, label_rate=0.3),
    Case("hard_timestack",
         "hard LSTMs, no big blanks, frame stacking 3, time_stack 2 and 3 after encoder layers 0 and 1, "
         "28-character alphabet, 2 predictor layers",
         dict(feature_dim=10, frame_stacking=3, encoder_hidden=[17, 22, 12], time_stacks=[2, 3, 1],
              embedding=9, predictor_hidden=[11, 21], joint_dim=23, joint_activation="relu", vocab_size=28,
              big_blank_durations=[], max_symbols=5, lstm_activation="hard", normalize="global"),
         seed=301, label_rate=0.35, weight_scale=2.5, lengths=LENGTHS + [150]),
    Case("soft_bigblank_cap",
         "soft LSTMs, big blanks [2,3], tanh joint, max_symbols 2 (the cap is hit), frame stacking 2",
         dict(feature_dim=8, frame_stacking=2, encoder_hidden=[21, 19], time_stacks=[1, 1], embedding=6,
              predictor_hidden=[15], joint_dim=13, joint_activation="tanh", vocab_size=12,
              big_blank_durations=[2, 3], max_symbols=2, lstm_activation="soft", normalize="global"),
         seed=401, label_rate=0.5, blank_rate=0.3, need_cap=True),
    Case("hard_f16",
         "weights stored as F16; hard LSTMs, big blank [3], frame stacking 4, time_stack 2 after encoder "
         "layer 1 of 3",
         dict(feature_dim=6, frame_stacking=4, encoder_hidden=[14, 18, 10], time_stacks=[1, 2, 1], embedding=5,
              predictor_hidden=[9, 10], joint_dim=12, joint_activation="relu", vocab_size=7,
              big_blank_durations=[3], max_symbols=3, lstm_activation="hard", normalize="global"),
         seed=503, label_rate=0.3, blank_rate=0.5, weight_scale=2.0, dtype="F16"),
    Case("soft_bf16",
         "weights stored as BF16; soft LSTMs, big blanks [5,2], tanh joint, no normalisation",
         dict(feature_dim=6, frame_stacking=2, encoder_hidden=[11], time_stacks=[1], embedding=7,
              predictor_hidden=[13], joint_dim=9, joint_activation="tanh", vocab_size=6,
              big_blank_durations=[5, 2], max_symbols=4, lstm_activation="soft", normalize="none"),
         seed=601, label_rate=0.3, blank_rate=0.5, dtype="BF16"),
    Case("soft_proj_ln",
         "NeMo's RNNEncoder pieces: projection LSTMs and per-layer LayerNorm (layer 0 both, time_stack 2; "
         "layer 1 LayerNorm only; layer 2 projection only), soft LSTMs, big blank [2], frame stacking 2",
         dict(feature_dim=7, frame_stacking=2, encoder_hidden=[16, 14, 12], time_stacks=[2, 1, 1], projs=[9, 0, 7],
              layer_norms=[True, True, False], embedding=6, predictor_hidden=[11], joint_dim=10,
              joint_activation="relu", vocab_size=8, big_blank_durations=[2], max_symbols=3, lstm_activation="soft",
              normalize="none"),
         seed=701, label_rate=0.3, blank_rate=0.5),
]


def _pick(n, limit):
    """Indices of the joint rows to keep: all, or `limit` spread evenly including first and last."""
    if n <= limit:
        return list(range(n))
    return sorted(set(int(round(i * (n - 1) / (limit - 1))) for i in range(limit)))


def golden_utterance(model, x):
    """Everything the C tests compare for one utterance (model in float64, x float32 [T, F])."""
    cfg = model.cfg
    steps = []
    with torch.no_grad():
        xd = torch.from_numpy(x.astype(np.float64))
        frontend = model.frontend(xd)
        f, layers = model.encode(xd)
        tokens, frames = greedy_decode(model, xd, on_step=lambda t, u, z, k: steps.append((t, u, z.clone(), k)))
        g, state = model.predictor_init()
        gs = [g]
        for k in tokens:
            g, state = model.predictor_step(k, state)
            gs.append(g)
    keep = _pick(len(steps), MAX_TU)
    out = {
        "features": x,
        "frontend": frontend.numpy(),
        "encoder": f.numpy(),
        "tokens": np.array(tokens, dtype=np.int32),
        "frames": np.array(frames, dtype=np.int32),
        "predictor": torch.stack(gs).numpy(),
        "joint.tu": np.array([[steps[i][0], steps[i][1]] for i in keep], dtype=np.int32).reshape(-1, 2),
        "joint.logits": (torch.stack([steps[i][2] for i in keep]).numpy() if keep
                         else np.zeros((0, cfg.n_out))),
    }
    for l, y in enumerate(layers):
        out[f"encoder.layer{l}"] = y.numpy()
    return out, steps


def _stats(cfg, steps, T_enc):
    """Counts of what the decoding did, and the smallest argmax margin."""
    V, blank = cfg.vocab_size, cfg.blank
    s = {"steps": len(steps), "labels": 0, "blanks": 0, "cap_hits": 0, "skip_past_end": 0,
         "big_at_last_frame": 0, "min_margin": float("inf")}
    for d in cfg.big_blank_durations:
        s[f"big{d}"] = 0
    here_t, here = -1, 0
    for t, u, z, k in steps:
        top2 = torch.topk(z, 2).values if z.numel() > 1 else z
        if z.numel() > 1:
            s["min_margin"] = min(s["min_margin"], float(top2[0] - top2[1]))
        if k < V:
            s["labels"] += 1
            here = here + 1 if here_t == t else 1
            here_t = t
            if here == cfg.max_symbols:
                s["cap_hits"] += 1
        elif k == blank:
            s["blanks"] += 1
        else:
            d = cfg.big_blank_duration(k)
            s[f"big{d}"] += 1
            if t + d > T_enc:
                s["skip_past_end"] += 1
            if t == T_enc - 1:
                s["big_at_last_frame"] += 1
    return s


def _merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = min(out[k], v) if k == "min_margin" else out.get(k, 0) + v
    return out


def _problems(case, cfg, s):
    bad = []
    if s["labels"] < 5:
        bad.append(f"{s['labels']} labels (want 5)")
    if s["blanks"] < 3:
        bad.append(f"{s['blanks']} blanks (want 3)")
    for d in cfg.big_blank_durations:
        if s[f"big{d}"] < 2:
            bad.append(f"big blank {d} chosen {s[f'big{d}']} times (want 2)")
    if case.need_cap and s["cap_hits"] == 0:
        bad.append("max_symbols cap never hit")
    if s["min_margin"] < MIN_MARGIN:
        bad.append(f"argmax margin {s['min_margin']:.2e} < {MIN_MARGIN}")
    return bad


def build_case(case, out_dir, max_tries=40, log=print):
    """Write one case into out_dir/<name>; returns its summary. Tries seeds case.seed, case.seed+1, ..."""
    cdir = os.path.join(out_dir, case.name)
    for attempt in range(max_tries):
        seed = case.seed + attempt
        cfg = build_config(name=f"golden-{case.name.replace('_', '-')}", **case.config)
        model, _ = random_model(cfg, seed, case.label_rate, case.blank_rate, case.big_rates, case.weight_scale)
        if os.path.isdir(cdir):
            shutil.rmtree(cdir)
        save_model(model, default_tokens(cfg.vocab_size), cdir, dtype=case.dtype, metadata={"seed": str(seed)})
        ref, _ = load_model(cdir, dtype=torch.float64)   # from the stored bytes
        ref32, _ = load_model(cdir, dtype=torch.float32)
        rng = np.random.default_rng(seed + 7_777)
        tensors, total = {}, None
        ok_fp32 = True
        for b, T in enumerate(case.lengths):
            x = random_features(ref, rng, T)
            utt, steps = golden_utterance(ref, x)
            for k, v in utt.items():
                tensors[f"utt{b}.{k}"] = v
            save_npy(os.path.join(cdir, f"utt{b}.npy"), x)
            st = _stats(cfg, steps, utt["encoder"].shape[0])
            total = st if total is None else _merge(total, st)
            ok_fp32 &= greedy_decode(ref32, x)[0] == utt["tokens"].tolist()
        bad = _problems(case, cfg, total)
        if not ok_fp32:
            bad.append("the float32 reference decodes differently")
        if not bad:
            write_safetensors(os.path.join(cdir, "golden.safetensors"), tensors,
                              {"n_utts": str(len(case.lengths))})
            total["seed"] = seed
            log(f"{case.name}: seed {seed}: " + ", ".join(
                f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in total.items() if k != "seed"))
            return total
        log(f"{case.name}: seed {seed} rejected: {'; '.join(bad)}")
    raise RuntimeError(f"{case.name}: no acceptable seed in {max_tries} tries")


README_HEAD = """# Golden files (generated: do not edit)

Written by `models/make_golden.sh` (`python3 -m rnntd_ref.golden`, models/rnntd_ref/golden.py) from tiny
random models; `tests/models/test_golden.py` regenerates them and compares with these bytes.

Each folder is a model directory (`model.yaml`, `weights.safetensors`, `tokens.txt`, FORMAT.md) plus
`utt{b}.npy` (the raw input features of utterance b, float32 [T, F], C order) and `golden.safetensors`.
Everything was computed in float64 from the stored weights and inputs, then stored as F32.

## golden.safetensors
`__metadata__`: `{"n_utts": "<N>"}`; for each utterance b < N:

| tensor | dtype | shape | what |
|---|---|---|---|
| `utt{b}.features` | F32 | [T, F] | raw (unnormalised) input, the same as utt{b}.npy |
| `utt{b}.frontend` | F32 | [ceil(T/k), kF] | after normalisation and frame stacking |
| `utt{b}.encoder.layer{l}` | F32 | [T_l, H_l] | output of encoder layer l before its time stacking |
| `utt{b}.encoder` | F32 | [T_enc, He] | encoder output |
| `utt{b}.tokens` | I32 | [U] | greedy multi-blank decoding |
| `utt{b}.frames` | I32 | [U] | encoder frame at which each token was emitted |
| `utt{b}.predictor` | F32 | [U+1, Hp] | row 0: predictor output after the start symbol; row u: after the u-th label |
| `utt{b}.joint.tu` | I32 | [N, 2] | (t, u) pairs the decoder evaluated: all of them, or 40 spread evenly |
| `utt{b}.joint.logits` | F32 | [N, V+n+1] | joint output at those pairs |

Tensors with a zero dimension (T = 0, U = 0) are present with an empty data range. Every argmax the
decoder took beats the runner-up by at least {margin} (column min margin), so fp32 arithmetic agrees.

## Cases
Utterance lengths T (input frames) in every case: {lengths} (hard_timestack, which subsamples by 18,
adds 150).

| case | weights | what it covers | joint evals | labels | blanks | big blanks | cap hits | skips past the end | big blank at the last frame | min margin | seed |
|---|---|---|---|---|---|---|---|---|---|---|---|
"""


def write_readme(out_dir, cases, summaries):
    rows = []
    for case, s in zip(cases, summaries):
        cfg = build_config(**case.config)
        bigs = ", ".join(f"{d}: {s[f'big{d}']}" for d in cfg.big_blank_durations) or "-"
        rows.append(f"| `{case.name}` | {case.dtype} | {case.about} | {s['steps']} | {s['labels']} | "
                    f"{s['blanks']} | {bigs} | {s['cap_hits']} | {s['skip_past_end']} | "
                    f"{s['big_at_last_frame']} | {s['min_margin']:.3g} | {s['seed']} |")
    text = README_HEAD.replace("{margin}", str(MIN_MARGIN)).replace("{lengths}", ", ".join(map(str, LENGTHS)))
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text + "\n".join(rows) + "\n")


def generate(out_dir, names=None, log=print):
    """Write every case (or those named) into out_dir; returns {name: summary}."""
    torch.set_num_threads(1)  # one summation order, whatever the machine
    cases = [c for c in CASES if names is None or c.name in names]
    if names:
        unknown = set(names) - {c.name for c in CASES}
        if unknown:
            raise ValueError(f"unknown case(s): {', '.join(sorted(unknown))}")
    os.makedirs(out_dir, exist_ok=True)
    summaries = [build_case(c, out_dir, log=log) for c in cases]
    if names is None:
        write_readme(out_dir, cases, summaries)
    return dict(zip((c.name for c in cases), summaries))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m rnntd_ref.golden", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--case", action="append", help="only this case (repeatable); the README is then left alone")
    args = ap.parse_args(argv)
    generate(args.out, args.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
