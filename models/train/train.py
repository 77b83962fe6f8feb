#!/usr/bin/env python3
"""Train the LSTM transducer with the multi-blank RNN-T loss, in resumable pieces of a few minutes.

One piece (one GPU-machine call):
  1. unpack the TTS engines, synthesise the fixed dev set (dev.txt, seed 1000) and, in the background,
     the piece's training shards (train.txt, seed = --data-seed): the corpus is made where it is used;
  2. compute 80-dim log-mel features on the GPU (features.py, exactly model.yaml's frontend);
  3. train from --resume (or from scratch: then frontend.mean/std are measured on the first shard) until
     --budget-s seconds after the start, taking in each new shard as soon as it is complete;
  4. evaluate on dev (batched greedy multi-blank decoding: WER, CER, frames skipped by big blanks), save
     OUT/ckpt.pt (weights in fp32 + counters) and export OUT/model/ (model.yaml, weights F16, tokens.txt).

  python3 -m rnntd_train.train --model models/train/en-char-small.yaml \
           --config models/train/en-char-small.train.json --engines .corpus/tts-root.tar.xz \
           --text .corpus/text --work /tmp/w --out $OUT --data-seed 1 [--resume ckpt.pt] [--budget-s 470]

Reproducible from (model, config, data seeds of the pieces, resume chain): the corpus is deterministic
for its seed, the batch order and SpecAugment draw from a generator seeded by (config seed, piece), and
the model's initialisation from the config seed. (GPU kernels are not bit-deterministic, so a rerun
reproduces the recipe and the numbers closely, not bit for bit.)
"""
import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

import torch

from rnntd_ref.config import load_config
from rnntd_ref.io import export_state_dict

from .data import (TOKENS, FeaturePool, add_manifest_retrying, decode_ids, error_rates, is_out_of_memory, seeded,
                   spec_augment)
from .gpu_channel import GpuChannel
from .graph_step import GraphedStep
from .loss import multiblank_rnnt_loss
from .model import TrainModel

SYNTH = [sys.executable, "-m", "rnntd_corpus.synth"]     # the corpus package of this installation


def log(out, rec):
    rec["wall"] = round(time.time() - T0, 1)
    print(json.dumps(rec), flush=True)
    with open(os.path.join(out, "log.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")


RUNNING = []   # the background synthesiser, to stop it (and its worker pool) when training ends


def synth(args, sentences, out, seed, start, count, aug, jobs, in_order=False, nice=0, phonemes="hibari.jsonl.xz"):
    cmd = ([] if not nice else ["nice", "-n", str(nice)]) + [
        *SYNTH, "--engines", args.engines, "--work", args.work, "--sentences", sentences,
        "--out", out, "--seed", str(seed), "--start", str(start), "--count", str(count), "--aug", str(aug),
        "--jobs", str(jobs)] + (["--in-order"] if in_order else [])
    if args.neural:
        cmd += ["--neural", args.neural]
        phon = os.path.join(args.text, phonemes)     # hibari's phonemised sentences of this split
        if os.path.exists(phon):
            cmd += ["--phonemes", phon]
    p = subprocess.Popen(cmd, start_new_session=True)
    RUNNING.append(p)
    if p.wait() != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd)
    RUNNING.remove(p)


def stop_synth():
    for p in list(RUNNING):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def shard_worker(args, cfg_train, stop):
    n, size = cfg_train["shards"], cfg_train["shard_utts"]
    for k in range(n):
        if stop.is_set():
            return
        try:
            synth(args, os.path.join(args.text, "train.txt.xz"), os.path.join(args.work, "train%02d" % k),
                  args.data_seed, k * size, size, cfg_train["aug"], args.jobs, nice=5)
        except subprocess.CalledProcessError as e:
            print("train.py: shard %d failed: %s" % (k, e), file=sys.stderr, flush=True)


@torch.no_grad()
def evaluate(model, pool, batch=200):
    model.eval()
    pairs, groups, skipped, frames = [], {}, 0, 0
    order = sorted(range(len(pool)), key=lambda i: pool.feats[i].shape[0])
    for k in range(0, len(order), batch):
        idx = order[k:k + batch]
        feats, flen, _, _ = pool.collate(idx)
        toks, _, st = model.greedy(feats, flen)
        skipped += st["skipped"]
        frames += st["enc_frames"]
        for i, tk in zip(idx, toks):
            r = pool.meta[i]
            ref, hyp = r["text"], decode_ids(tk)
            pairs.append((ref, hyp))
            for key in (r["engine"], "aug" if r["aug"] else "clean"):
                groups.setdefault(key, []).append((ref, hyp))
    model.train()
    wer, cer = error_rates(pairs)[:2]
    res = {"dev_wer": round(wer, 4), "dev_cer": round(cer, 4), "dev_utts": len(pairs),
           "skip_frac": round(skipped / max(frames, 1), 4)}
    for key, p in sorted(groups.items()):
        res["wer_" + key] = round(error_rates(p)[0], 4)
    return res, pairs


def save_ckpt(path, model, step, pieces, extra):
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    torch.save({"model": sd, "step": step, "pieces": pieces, **extra}, path + ".tmp")
    os.replace(path + ".tmp", path)


def save_opt(path, opt):
    """AdamW's state (step counts, first and second moments) in bfloat16: 4 bytes per parameter instead
    of 8, so it comes back from the GPU machine as one file beside the checkpoint (the 3.5 M-parameter
    model: 14 MB). A resumed piece then continues the moments instead of starting them from zero."""
    st = opt.state_dict()
    state = {k: {n: (v.detach().to("cpu", torch.bfloat16) if torch.is_tensor(v) and v.numel() > 1 else v)
                 for n, v in s.items()} for k, s in st["state"].items()}
    torch.save({"state": state, "param_groups": st["param_groups"]}, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_opt(path, opt, device):
    """save_opt's file into opt (moments back to fp32 on the device); the learning rate is the trainer's."""
    st = torch.load(path, map_location="cpu")
    state = {k: {n: (v.to(device, torch.float32) if torch.is_tensor(v) and v.numel() > 1 else v)
                 for n, v in s.items()} for k, s in st["state"].items()}
    groups = opt.state_dict()["param_groups"]
    if [len(g["params"]) for g in groups] != [len(g["params"]) for g in st["param_groups"]]:
        raise ValueError("%s: optimiser state of another model (parameter groups differ)" % path)
    opt.load_state_dict({"state": state, "param_groups": groups})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model.yaml of the architecture")
    ap.add_argument("--config", required=True, help="training hyper-parameters (JSON)")
    ap.add_argument("--engines", required=True)
    ap.add_argument("--text", required=True, help="folder with train.txt.xz and dev.txt")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-seed", type=int, required=True)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--resume-opt", default=None,
                    help="the optimiser state a piece wrote (OUT/opt.pt, save_opt); without it a resumed piece "
                         "first runs the config's fill_steps at learning rate 0 to fill AdamW's moments")
    ap.add_argument("--budget-s", type=float, default=470.0, help="stop training this long after the start")
    ap.add_argument("--final-piece", action="store_true",
                    help="decay the learning rate linearly to min_lr_frac over this piece's time budget")
    ap.add_argument("--max-frames", type=int, default=0, help="override the config's max_frames")
    ap.add_argument("--max-cells", type=int, default=0, help="override the config's max_cells")
    ap.add_argument("--shards", type=int, default=0, help="override the config's shard count")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--neural", default=None,
                    help="the neural voices' packages for synth.py (a folder, or a .tar.xz unpacked into --work)")
    ap.add_argument("--name", default="en-char-small", help="the exported model's name")
    ap.add_argument("--no-cuda-graphs", action="store_true",
                    help="run every step eagerly with batches of any shape (batches()), as before graph_step.py")
    ap.add_argument("--t-quant", type=int, default=96, help="length buckets of the CUDA-graph batches (frames)")
    ap.add_argument("--graph-warmup-stream", choices=("new", "shared"), default="shared",
                    help="the stream of each shape's eager warm-up before its capture: one for all (the default "
                         "since pieces l7-l8: 2 and 7 graph releases per piece against l5-l6's 33 and 49; "
                         "models/README.md) or a new one per shape (as pieces 9-l6 ran)")
    a = ap.parse_args()
    a.engines, a.work, a.text = os.path.abspath(a.engines), os.path.abspath(a.work), os.path.abspath(a.text)
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    if a.neural and a.neural.endswith(".tar.xz"):
        import tarfile
        dest = os.path.join(a.work, "neural")
        if not os.path.isdir(dest):
            with tarfile.open(a.neural) as t:
                t.extractall(dest)
        a.neural = dest
    elif a.neural:
        a.neural = os.path.abspath(a.neural)
    cfg = load_config(a.model)
    tc = json.load(open(a.config))
    for k in ("max_frames", "max_cells", "shards"):
        if getattr(a, k):
            tc[k] = getattr(a, k)
    if a.device.startswith("cuda"):
        # piece 12 ran out of device memory with 14 GiB outside PyTorch's allocator and cuFFT failing
        # (CUFFT_INTERNAL_ERROR) in the per-replay channel: every (batch, length) of its FFTs and the
        # frontend's STFT is a plan of its own, and the plan cache kept up to 4,096 of them
        torch.backends.cuda.cufft_plan_cache.max_size = tc.get("cufft_plans", 16)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.device(a.device)

    ck = torch.load(a.resume, map_location="cpu") if a.resume else None
    pieces = (ck["pieces"] if ck else []) + [a.data_seed]
    seeded(tc["seed"])
    model = TrainModel(cfg)
    if ck:
        model.load_state_dict(ck["model"])
    model.to(dev).train()
    step0 = ck["step"] if ck else 0
    rng = seeded(tc["seed"] * 1000 + a.data_seed)
    log(a.out, {"event": "start", "step": step0, "pieces": pieces, "device": str(dev), "config": tc,
                "final_piece": a.final_piece,
                "params": sum(p.numel() for p in model.parameters()), "gpu": torch.cuda.get_device_name(0)
                if dev.type == "cuda" else None})

    # -- corpus: dev set first (fixed for every piece), then training shards in the background
    dev_dir = os.path.join(a.work, "dev")
    synth(a, os.path.join(a.text, "dev.txt"), dev_dir, 1000, 0, tc["dev_utts"], 0.5, a.jobs + 1, in_order=True,
          phonemes="hibari-dev.jsonl.xz")
    stop = threading.Event()
    worker = threading.Thread(target=shard_worker, args=(a, tc, stop), daemon=True)
    worker.start()
    dev_pool = FeaturePool(cfg.frontend, dev, max_seconds=30.0)
    dev_pool.add_manifest(os.path.join(dev_dir, "manifest.jsonl"))
    gpu_ch = tc.get("gpu_channel")
    pool = FeaturePool(cfg.frontend, dev, max_seconds=tc["max_seconds"], vtlp=tc.get("vtlp", True),
                       keep_waves=bool(gpu_ch) and dev.type == "cuda")
    channel = GpuChannel(gpu_ch, cfg.frontend.sample_rate, dev) if pool.waves is not None else None
    if ck:
        # the resumed model on this piece's dev set: the figure the piece must beat
        res, _ = evaluate(model, dev_pool)
        log(a.out, dict(res, step=step0, event="dev_start"))
    loaded = set()
    shards_stopped = []
    gstep = None

    def free_memory(why="out of memory taking in a shard"):
        if dev.type != "cuda":
            return
        torch.backends.cuda.cufft_plan_cache.clear()
        if gstep is not None:
            gstep.release(why)
        else:
            torch.cuda.empty_cache()

    def dev_eval(event):
        """The dev evaluation; piece 12 died in one (out of memory: the graphs' pool had grown back to 51
        GiB). On out of memory: free (drop the graphs) and once more; then log dev_failed and go on."""
        for attempt in (0, 1):
            try:
                res, pairs = evaluate(model, dev_pool)
                log(a.out, dict(res, step=step, event=event))
                return pairs
            except RuntimeError as e:
                if not is_out_of_memory(e):
                    raise
                if attempt:
                    log(a.out, {"event": "dev_failed", "step": step, "why": repr(e)[:300]})
                    return None
                free_memory("out of memory in the dev evaluation")

    def take_new_shards(block):
        got = 0
        while True:
            for k in range(tc["shards"]):
                m = os.path.join(a.work, "train%02d" % k, "manifest.jsonl")
                if k not in loaded and os.path.exists(m) and not shards_stopped:
                    n, why = add_manifest_retrying(pool, m, free_memory)
                    if n is None:
                        # even with the graphs dropped the device is full: train on what the pool has
                        shards_stopped.append(k)
                        log(a.out, {"event": "shards_stopped", "shard": k, "why": why, "pool": len(pool)})
                        return got
                    loaded.add(k)
                    got += n
                    log(a.out, {"event": "shard", "shard": k, "utts": n, "pool": len(pool),
                                "hours": round(sum(r["duration"] for r in pool.meta) / 3600, 2)})
            if got or not block or not worker.is_alive() or shards_stopped:
                return got
            time.sleep(1.0)

    take_new_shards(block=True)
    if not ck:
        mean, std = pool.stats()
        model.frontend.mean.copy_(mean.to(dev))
        model.frontend.std.copy_(std.to(dev))
        log(a.out, {"event": "norm", "mean0": float(mean[0]), "std0": float(std[0])})

    opt = torch.optim.AdamW(model.parameters(), lr=tc["lr"], betas=(0.9, 0.98), weight_decay=tc["weight_decay"])
    fill = 0
    if a.resume_opt:
        load_opt(a.resume_opt, opt, dev)
        log(a.out, {"event": "opt_resumed", "path": a.resume_opt})
    elif ck:
        fill = tc.get("fill_steps", 0)       # AdamW's moments from zero: fill them before moving
    durations = list(cfg.big_blank_durations)
    step, piece_step = step0, 0
    deadline = T0 + a.budget_s
    last_ckpt = time.time()
    loss_acc, n_acc, t_acc, bad, prep_s = 0.0, 0, time.time(), 0, 0.0
    mean = model.frontend.mean.detach()
    use_graphs = dev.type == "cuda" and not a.no_cuda_graphs

    def compute(feats, flen, labels, ulen, weight):
        logits, enc_lens = model(feats, flen, labels)
        return multiblank_rnnt_loss(logits, labels, enc_lens, ulen, durations, tc["sigma"], reduction="mean",
                                    weights=weight)
    gstep = GraphedStep(model, compute, enabled=use_graphs, log=lambda rec: log(a.out, rec),
                        shared_warmup_stream=a.graph_warmup_stream == "shared") if use_graphs else None
    if use_graphs:
        log(a.out, {"event": "buckets", "shapes": pool.bucket_shapes(tc["max_frames"], tc["max_cells"],
                                                                     cfg.subsampling, a.t_quant)})
    done = False
    too_big = set()          # batch shapes whose step ran out of device memory twice: left out from then on
    oom_once = set()
    t_train0 = time.time()
    while not done:
        if use_graphs:
            order, dropped = pool.bucket_batches(rng, tc["max_frames"], tc["max_cells"], cfg.subsampling, a.t_quant)
            if dropped:
                log(a.out, {"event": "left_out", "utts": dropped, "pool": len(pool)})
        else:
            order = [(idx, None) for idx in pool.batches(rng, tc["max_frames"], tc["max_cells"], cfg.subsampling)]
        for idx, shape in order:
            if time.time() > deadline:
                done = True
                break
            if shape is not None and shape in too_big:
                continue
            warm = 0.0 if piece_step < fill else min(1.0, (piece_step - fill + 1) / tc["warmup"])
            if a.final_piece:
                # last piece: linear decay over the piece's time budget, down to min_lr_frac
                prog = min(1.0, (time.time() - t_train0) / max(deadline - t_train0, 1.0))
                decay = 1.0 - (1.0 - tc["min_lr_frac"]) * prog
            else:
                decay = min(1.0, math.sqrt(tc["decay_from"] / max(step, 1)))
            lr = tc["lr"] * warm * max(decay, tc["min_lr_frac"])
            for g in opt.param_groups:
                g["lr"] = lr
            if use_graphs:
                # one fixed shape per length bucket; forward + loss + backward replayed as a CUDA graph
                tp = time.perf_counter()
                try:
                    feats, flen, labels, ulen, weight = pool.collate_to(idx, shape, channel, rng)
                except RuntimeError as e:      # e.g. out of memory: go on with the pooled features
                    log(a.out, {"event": "channel_failed", "why": repr(e)[:300]})
                    channel = None
                    feats, flen, labels, ulen, weight = pool.collate_to(idx, shape)
                if step >= tc["specaug_from"]:
                    feats = spec_augment(feats, flen, mean, rng, tc["specaug"])
                prep_s += time.perf_counter() - tp
                try:
                    loss = gstep(feats, flen, labels, ulen, weight)
                except RuntimeError as e:
                    if "out of memory" not in str(e):
                        raise
                    # piece 9: the 17th shape's first (eager) step found 51 GiB held by the graphs'
                    # pool and the kept samples: drop the graphs once and try the shape again later;
                    # a shape that runs out of memory a second time is left out
                    del feats, flen, labels, ulen, weight
                    if shape in oom_once:
                        too_big.add(shape)
                    oom_once.add(shape)
                    gstep.release("out of memory in a step of shape %s" % (list(shape),))
                    log(a.out, {"event": "shape_out_of_memory", "shape": list(shape), "left_out": len(too_big),
                                "allocated_gib": round(torch.cuda.memory_allocated() / 2 ** 30, 2)})
                    continue
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), tc["clip"])
                if not bool(torch.isfinite(loss) & torch.isfinite(gn)):     # the step's one sync
                    bad += 1
                    continue
            else:
                feats, flen, labels, ulen = pool.collate(idx)
                if step >= tc["specaug_from"]:
                    feats = spec_augment(feats, flen, mean, rng, tc["specaug"])
                logits, enc_lens = model(feats, flen, labels)
                loss = multiblank_rnnt_loss(logits, labels, enc_lens, ulen, durations, tc["sigma"], reduction="mean")
                opt.zero_grad(set_to_none=True)
                if not torch.isfinite(loss):
                    bad += 1
                    continue
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), tc["clip"])
                if not torch.isfinite(gn):
                    bad += 1
                    opt.zero_grad(set_to_none=True)
                    continue
            opt.step()
            step += 1
            piece_step += 1
            loss_acc += float(loss.detach())
            n_acc += 1
            if use_graphs and step % tc["log_every"] == 0:
                free_b, total_b = torch.cuda.mem_get_info()
                if free_b < tc.get("min_free_gib", 8) * 2 ** 30:
                    # the graphs' pool grows back after a release (piece 12: 51 GiB again 350 s later),
                    # and what else needs memory (shards, cuFFT, the dev evaluation) would fail
                    free_memory("%.1f GiB free of %.1f" % (free_b / 2 ** 30, total_b / 2 ** 30))
            if step % tc["log_every"] == 0:
                log(a.out, {"step": step, "loss": round(loss_acc / n_acc, 4), "lr": round(lr, 6),
                            "batch": len(idx), "steps_per_s": round(n_acc / (time.time() - t_acc), 2),
                            "bad": bad, "gnorm": round(float(gn), 2), "prep_ms": round(1000 * prep_s / n_acc, 1),
                            **({"replays": gstep.replays, "eager": gstep.eager, "graphs": len(gstep.graphs),
                                "capture_s": round(gstep.capture_s, 1), "releases": gstep.releases,
                                "reserved_gib": round(torch.cuda.memory_reserved() / 2 ** 30, 1)}
                               if gstep else {})})
                loss_acc, n_acc, t_acc, prep_s = 0.0, 0, time.time(), 0.0
            if step % tc["eval_every"] == 0:
                dev_eval("dev")
            if time.time() - last_ckpt > tc["ckpt_every_s"]:
                save_ckpt(os.path.join(a.out, "ckpt.pt"), model, step, pieces, {"config": tc})
                save_opt(os.path.join(a.out, "opt.pt"), opt)
                last_ckpt = time.time()
            if step % 25 == 0 and take_new_shards(block=False):
                break                                   # new data: draw a fresh batch order over all of it
    stop.set()
    stop_synth()
    save_ckpt(os.path.join(a.out, "ckpt.pt"), model, step, pieces, {"config": tc})
    save_opt(os.path.join(a.out, "opt.pt"), opt)
    pairs = dev_eval("dev_final")
    with open(os.path.join(a.out, "dev_hyps.jsonl"), "w") as f:
        for ref, hyp in pairs or []:
            f.write(json.dumps({"ref": ref, "hyp": hyp}) + "\n")
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    cfg.name = a.name
    export_state_dict(cfg, sd, TOKENS, os.path.join(a.out, "model"), dtype="F16")
    log(a.out, {"event": "end", "step": step, "hours_seen": round(sum(r["duration"] for r in pool.meta) / 3600, 2),
                "pool_utts": len(pool)})


T0 = time.time()
if __name__ == "__main__":
    main()
