#!/usr/bin/env python3
"""How the CUDA graphs' memory grows over a piece's length buckets, and what the releases cost: captures
every bucket shape once (in a seeded random order, as batches arrive in training), with GraphedStep's own
bound (max_reserved_frac: above it after a capture, every graph is released), then replays rounds of
steps over all shapes in random order. Prints, per capture, the device memory reserved and allocated; at
the end the captures, releases, capture seconds and the steps/s of the rounds (a round is one step of
each shape: training's mix of shapes, without its data loading).

Why: in pieces l5 and l6 (models/README.md) the pool passed 75% of the H100 33 and 49 times per piece and
the recaptures took ~100 s of each 450 s piece. Run once per warm-up stream policy, in separate processes:

    for s in new shared; do python3 -m rnntd_train.bench_graph_pool --model models/train/en-char-medium.yaml \
        --warmup-stream $s; done

The default shapes are en-char-medium's 19 buckets (t_quant 96, max_frames 120,000, max_cells 4,000,000:
the `buckets` event of a piece's log.jsonl). GPU only; nothing is asserted.
"""
import argparse
import os
import random
import time

import torch

from rnntd_ref.config import load_config

from . import loss as loss_mod
from . import model as train_model
from .bench_step import make_batch
from .graph_step import GraphedStep
from .loss import multiblank_rnnt_loss

HERE = os.path.dirname(os.path.abspath(__file__))
MEDIUM_BUCKETS = ("1250x96x24,625x192x40,416x288x56,312x384x72,250x480x88,208x576x104,178x672x128,156x768x144,"
                  "138x864x160,125x960x176,113x1056x192,99x1152x208,82x1248x232,71x1344x248,62x1440x264,"
                  "55x1536x280,49x1632x296,44x1728x312,38x1824x336")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(HERE, "en-char-medium.yaml"))
    ap.add_argument("--shapes", default=MEDIUM_BUCKETS, help="BxTxU,... (T in feature frames)")
    ap.add_argument("--warmup-stream", choices=("new", "shared"), default="shared")
    ap.add_argument("--rounds", type=int, default=3, help="replay rounds after the captures")
    ap.add_argument("--max-reserved-frac", type=float, default=0.75)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_graph_pool: no CUDA device")
        return 77
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = load_config(a.model)
    durations = list(cfg.big_blank_durations)
    train_model.USE_SEQ_FN = True
    loss_mod.USE_LATTICE_FN = True
    torch.manual_seed(0)
    m = train_model.TrainModel(cfg).to(dev).train()

    def compute(feats, flen, labels, ulen, weight):
        logits, enc_lens = m(feats, flen, labels)
        return multiblank_rnnt_loss(logits, labels, enc_lens, ulen, durations, 0.1, weights=weight)

    events = []
    gstep = GraphedStep(m, compute, log=events.append, max_reserved_frac=a.max_reserved_frac,
                        shared_warmup_stream=a.warmup_stream == "shared")
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    batches = {s: make_batch(dev, s[0], s[1], s[2], cfg, seed=i) for i, s in enumerate(shapes)}
    rng = random.Random(a.seed)
    gib = 2 ** 30
    print("model %s, %s, torch %s, warm-up stream %s, %d shapes, bound %.0f%% of the device" % (
        cfg.name, torch.cuda.get_device_name(0), torch.__version__, a.warmup_stream, len(shapes),
        100 * a.max_reserved_frac), flush=True)
    print("| step | shape BxTxU | what | s | graphs | reserved GiB | allocated GiB |")
    print("|---|---|---|---|---|---|---|")
    order = shapes[:]
    rng.shuffle(order)
    t_all = time.perf_counter()
    step = 0
    losses = {}        # shape -> the loss of each round: the same under either policy (fixed weights, fixed batches)
    for rnd in range(1 + a.rounds):
        if rnd:
            rng.shuffle(order)
        t_round = time.perf_counter()
        for s in order:
            key_known = len(gstep.graphs)
            releases = gstep.releases
            t0 = time.perf_counter()
            loss = gstep(*batches[s])
            losses.setdefault(s, []).append(float(loss))
            dt = time.perf_counter() - t0
            step += 1
            what = ("capture" if len(gstep.graphs) > key_known else "replay") if gstep.releases == releases \
                else "capture + release"
            if what != "replay":
                print("| %d | %s | %s | %.2f | %d | %.1f | %.1f |" % (
                    step, "x".join(map(str, s)), what, dt, len(gstep.graphs),
                    torch.cuda.memory_reserved() / gib, torch.cuda.memory_allocated() / gib), flush=True)
        torch.cuda.synchronize()
        if rnd:
            dt = time.perf_counter() - t_round
            print("round %d: %d steps in %.2f s (%.2f steps/s), graphs %d, releases so far %d" % (
                rnd, len(order), dt, len(order) / dt, len(gstep.graphs), gstep.releases), flush=True)
    print("warm-up stream %s: %d steps in %.1f s, capture s %.1f, releases %d, replays %d, eager %d, peak reserved %.1f GiB"
          % (a.warmup_stream, step, time.perf_counter() - t_all, gstep.capture_s, gstep.releases, gstep.replays,
             gstep.eager, torch.cuda.max_memory_reserved() / gib), flush=True)
    # the numbers: each shape's loss in capture order is the eager warm-up, later rounds the graph replays
    total = [sum(v[r] for v in losses.values()) for r in range(1 + a.rounds)]
    print("loss sum over the %d shapes per round (round 0: the eager warm-up steps; later rounds: replays, or a warm-up again after a release): %s" % (
        len(shapes), " ".join("%.6f" % t for t in total)))
    print("losses by shape (round 0 .. %d): %s" % (a.rounds, "; ".join(
        "%s %s" % ("x".join(map(str, s)), " ".join("%.6f" % v for v in losses[s])) for s in shapes)), flush=True)
    for e in events:
        if e.get("event") in ("graphs_released", "graph_failed", "graph_bound_raised"):
            print(e, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
