#!/usr/bin/env python3
"""Time one training step of a model architecture on random data, by part, with autograd through the
plain loops or the hand-written backwards: modes `loop` (LSTM layers and loss through autograd),
`lstmfn` (lstm_fn.HardLSTMSeq, loss through autograd), `fn` (both hand-written, eager: train.py
--no-cuda-graphs), `graph` (fn's forward, loss and backward replayed as one CUDA graph per shape,
graph_step.py: the default of train.py on a GPU; clipping and AdamW eager after it). In graph mode it
also checks the replay against eager: the loss and gradients of another batch of the same shape
(other features, labels and lengths), computed eagerly and by replaying the graph captured on the first
batch, with the same weights; it prints the largest differences (printed, not asserted).

    python3 -m rnntd_train.bench_step [--model models/train/en-char-small.yaml] [--shapes 300x400x50,80x1200x150]
                                      [--reps 5] [--modes loop,lstmfn,fn] [--device cuda]

A shape BxTxU is B utterances padded to T feature frames (lengths drawn from [0.7 T, T]) with up to U
labels. Prints medians (ms) of: the whole step (forward, loss, backward, clipping, AdamW), the encoder's
forward + backward alone, the loss's forward + backward alone on fixed logits, and the batch's
preparation (FeaturePool.collate from fp16 features on the device, then spec_augment as train.py calls
them; the same for every mode). Timings synchronise the
device around each measured region; nothing is asserted.
"""
import argparse
import os
import random
import statistics
import time

import torch

from rnntd_ref.config import load_config

from . import loss as loss_mod
from . import model as train_model
from .data import FeaturePool, spec_augment
from .graph_step import GraphedStep
from .loss import multiblank_rnnt_loss

HERE = os.path.dirname(os.path.abspath(__file__))


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed(dev, fn, reps):
    fn()                                   # warm-up (allocator, cuBLAS handles)
    out = []
    for _ in range(reps):
        sync(dev)
        t0 = time.perf_counter()
        fn()
        sync(dev)
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def profile_step(dev, step, shape, mode, steps=3):
    """Where a step's time goes: device busy time (sum of kernel times) against wall time, launches per step."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    sync(dev)
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        sync(dev)
    wall = (time.perf_counter() - t0) * 1e3 / steps
    ev = prof.key_averages()
    dkey = "self_device_time_total" if hasattr(ev[0], "self_device_time_total") else "self_cuda_time_total"
    busy = sum(getattr(e, dkey) for e in ev) / 1e3 / steps
    launches = sum(e.count for e in ev if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC",
                                                  "cudaGraphLaunch")) / steps
    print("profile %s %s: wall %.1f ms/step (under the profiler), device busy %.1f ms/step (%.0f%%), "
          "%.0f kernel launches/step" % (shape, mode, wall, busy, 100 * busy / max(wall, 1e-9), launches), flush=True)
    sort = dkey if dev.type == "cuda" else "self_cpu_time_total"
    print(ev.table(sort_by=sort, row_limit=18, max_name_column_width=60), flush=True)


def make_batch(dev, B, T, U, cfg, seed):
    """B utterances padded to T frames (lengths from [0.7 T, T], the first T) with up to U labels (the
    first U), from seed: feats, flen, labels, ulen, weight (all 1), on dev."""
    g = torch.Generator().manual_seed(seed)
    flen = (T * (0.7 + 0.3 * torch.rand(B, generator=g))).long().clamp(1, T)
    flen[0] = T
    ulen = (U * (0.5 + 0.5 * torch.rand(B, generator=g))).long().clamp(1, U)
    ulen[0] = U
    feats = torch.randn(B, T, cfg.feature_dim, generator=g).to(dev)
    labels = torch.randint(0, cfg.vocab_size, (B, U), generator=g).to(dev)
    return feats, flen.to(dev), labels, ulen.to(dev), torch.ones(B, device=dev)


def compare_replay(dev, m, compute, gstep, shape, B, T, U, cfg, seed):
    """Loss and gradients of one new batch: eager against the replay of the graph captured on another
    batch of the same shape (same weights: no optimiser step between). Prints the largest differences."""
    batch = make_batch(dev, B, T, U, cfg, seed)
    params = [p for p in m.parameters() if p.requires_grad]
    replays = gstep.replays
    loss_g = gstep(*batch).double()
    replayed = gstep.replays == replays + 1
    grads_g = [p.grad.detach().double().clone() for p in params]
    for p in params:
        p.grad.zero_()
    loss_e = compute(*batch)
    loss_e.backward()
    loss_e = loss_e.detach().double()
    d_grad = max(float((p.grad.double() - g).abs().max()) for p, g in zip(params, grads_g))
    g_max = max(float(g.abs().max()) for g in grads_g)
    print("%s graph vs eager on another batch of the shape (%s): loss %.6f vs %.6f (|diff| %.3g), "
          "max |grad diff| %.3g (max |grad| %.3g)" % (
              shape, "replayed" if replayed else "NOT replayed", float(loss_g), float(loss_e),
              abs(float(loss_g - loss_e)), d_grad, g_max), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(HERE, "en-char-small.yaml"))
    ap.add_argument("--shapes", default="300x400x50,80x1200x150")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--modes", default="loop,lstmfn,fn")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--profile", action="store_true",
                    help="also profile 3 steps of each shape (torch.profiler): the device's busy time against "
                         "the wall time, kernel launches per step, the top operators by device and host time")
    a = ap.parse_args()
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = load_config(a.model)
    durations = list(cfg.big_blank_durations)
    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu (%d threads)" % torch.get_num_threads()
    print("model %s, %s, torch %s, median of %d" % (cfg.name, name, torch.__version__, a.reps))
    print("| shape BxTxU | mode | step ms | steps / s | encoder fwd+bwd ms | loss fwd+bwd ms | batch prep ms "
          "| utterance-seconds / s |")
    print("|---|---|---|---|---|---|---|---|")
    specaug = {"freq_masks": 2, "freq_width": 12, "time_masks": 2, "time_width": 25}
    for shape in a.shapes.split(","):
        B, T, U = (int(v) for v in shape.split("x"))
        feats, flen, labels, ulen, weight = make_batch(dev, B, T, U, cfg, seed=1)
        pool = FeaturePool.of([feats[b, :int(flen[b])].half() for b in range(B)],
                              [labels[b, :int(ulen[b])].cpu() for b in range(B)], dev)
        mean = feats.mean(dim=(0, 1))
        t_prep = timed(dev, lambda: spec_augment(*pool.collate(list(range(B)))[:2], mean, random.Random(1), specaug),
                       a.reps)
        for mode in a.modes.split(","):
            train_model.USE_SEQ_FN = mode in ("lstmfn", "fn", "graph")
            loss_mod.USE_LATTICE_FN = mode in ("fn", "graph")
            torch.manual_seed(0)
            m = train_model.TrainModel(cfg).to(dev).train()
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

            def compute(feats, flen, labels, ulen, weight):
                logits, enc_lens = m(feats, flen, labels)
                return multiblank_rnnt_loss(logits, labels, enc_lens, ulen, durations, 0.05, weights=weight)

            gstep = GraphedStep(m, compute) if mode == "graph" else None

            def step():
                if gstep is not None:
                    loss = gstep(feats, flen, labels, ulen, weight)
                    gn = torch.nn.utils.clip_grad_norm_(m.parameters(), 5.0)
                    bool(torch.isfinite(loss) & torch.isfinite(gn))      # train.py's one sync per step
                    opt.step()
                    return
                logits, enc_lens = m(feats, flen, labels)
                loss = multiblank_rnnt_loss(logits, labels, enc_lens, ulen, durations, 0.05)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(m.parameters(), 5.0)
                opt.step()

            def enc():
                f, _ = m.encode(feats, flen)
                f.sum().backward()

            with torch.no_grad():
                logits0, enc_lens0 = m(feats, flen, labels)

            def loss_only():
                lg = logits0.detach().requires_grad_(True)
                multiblank_rnnt_loss(lg, labels, enc_lens0, ulen, durations, 0.05).backward()

            if gstep is not None:                     # the first step: eager on a side stream + the capture
                sync(dev)
                t0 = time.perf_counter()
                step()
                sync(dev)
                print("%s graph: first step (eager + capture) %.1f ms" % (shape, (time.perf_counter() - t0) * 1e3),
                      flush=True)
            t_step = timed(dev, step, a.reps)
            if gstep is not None and gstep.failed:
                print("graph capture failed, the step ran eagerly: %s" % list(gstep.failed.values()), flush=True)
            if gstep is not None and gstep.graphs:
                compare_replay(dev, m, compute, gstep, shape, B, T, U, cfg, seed=2)
            if a.profile:
                profile_step(dev, step, shape, mode)
            if gstep is None:
                t_enc = timed(dev, enc, a.reps)
                t_loss = timed(dev, loss_only, a.reps)
            else:
                t_enc = t_loss = float("nan")             # parts of one graph: not timed apart
            audio_s = float(flen.sum()) / 100.0
            print("| %s | %s | %.1f | %.2f | %.1f | %.1f | %.1f | %.0f |" % (
                shape, mode, t_step, 1e3 / t_step, t_enc, t_loss, t_prep, audio_s / (t_step / 1e3)), flush=True)
            del m, opt, logits0, gstep
            if dev.type == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
