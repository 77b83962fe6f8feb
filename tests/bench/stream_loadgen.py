#!/usr/bin/python3
"""Streaming load generator for rnntd's GET /v1/stream: C concurrent clients, each streaming audio at
real time in fixed chunks (160 ms by default) and reading partial results; prints the partial-result
latency after a chunk arrives.

  tests/bench/stream_loadgen.py --url ws://127.0.0.1:PORT/v1/stream --streams 25,50,100 --duration 20 \\
      models/en-char-small/samples/*.wav

Each client streams the WAVs (16-bit mono at the model's rate) back to back as one stream, sends
{"type":"eof"} at the end, waits for the final and starts a new stream, until the duration is over.
Chunk k is sent at start + k * chunk (real time; the client's own lateness is reported). Its latency
is the time from sending it to the first partial whose audio_s covers every frame that chunk completes
(frames = 1 + (samples - win) / hop, win and hop from --win/--hop). A benchmark prints what it saw; it
asserts nothing. Needs python3-websockets."""
import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import wave

import websockets


def load_pcm(paths):
    out = []
    for p in paths:
        with wave.open(p) as w:
            if w.getsampwidth() != 2 or w.getnchannels() != 1:
                sys.exit("%s: 16-bit mono WAV needed" % p)
            out.append((w.readframes(w.getnframes()), w.getframerate()))
    return out


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def client(args, pcm, rate, stats, stop_at, start_delay):
    await asyncio.sleep(start_delay)
    chunk_bytes = int(rate * args.chunk_ms / 1000) * 2
    while time.monotonic() < stop_at:
        try:
            async with websockets.connect(args.url, max_size=None, ping_interval=None, close_timeout=5) as ws:
                await ws.send(json.dumps({"type": "config", "encoding": "pcm_s16le", "sample_rate": rate, "partials": True}))
                ready = json.loads(await ws.recv())
                if ready.get("type") != "ready":
                    stats["errors"].append(str(ready))
                    return
                sent = []  # (frames this chunk completes, send time)
                done = asyncio.get_running_loop().create_future()

                async def reader():
                    k = 0
                    async for m in ws:
                        doc = json.loads(m)
                        now = time.monotonic()
                        if doc["type"] == "partial":
                            stats["partials"] += 1
                            frames = round(doc["audio_s"] / args.hop_s)
                            while k < len(sent) and sent[k][0] <= frames:
                                stats["lat"].append(now - sent[k][1])
                                k += 1
                        elif doc["type"] == "final":
                            stats["finals"] += 1
                        elif doc["type"] == "error":
                            stats["errors"].append(doc["error"]["code"])
                    if not done.done():
                        done.set_result(ws.close_code)

                rt = asyncio.ensure_future(reader())
                t0 = time.monotonic()
                samples = 0
                for k, i in enumerate(range(0, len(pcm), chunk_bytes)):
                    due = t0 + k * args.chunk_ms / 1000
                    delay = due - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    stats["client_late"].append(max(0.0, -delay))
                    c = pcm[i:i + chunk_bytes]
                    samples += len(c) // 2
                    frames = 0 if samples < args.win else 1 + (samples - args.win) // args.hop
                    sent.append((frames, time.monotonic()))
                    await ws.send(c)
                    stats["chunks"] += 1
                    if time.monotonic() > stop_at + 30:
                        break
                await ws.send(json.dumps({"type": "eof"}))
                code = await asyncio.wait_for(done, 60)
                await rt
                if code not in (1000, 1001):
                    stats["errors"].append("close %s" % code)
        except Exception as e:  # noqa: BLE001 - a benchmark reports every failure and goes on
            stats["errors"].append(repr(e)[:120])
            await asyncio.sleep(0.5)


async def run_level(args, pcms, n, first=0, count=None, t_start=None):
    """Clients first .. first + count - 1 of n (all by default), the level starting at t_start."""
    stats = {"lat": [], "client_late": [], "partials": 0, "finals": 0, "chunks": 0, "errors": []}
    rng = random.Random(n * 7919 + first)
    t_start = time.monotonic() if t_start is None else t_start
    stop_at = t_start + args.warmup + args.duration
    tasks = []
    for i in range(first, first + (n if count is None else count)):
        order = pcms[i % len(pcms):] + pcms[:i % len(pcms)]
        pcm = b"".join(p for p, _ in order)
        spread = n / args.open_rate if args.open_rate > 0 else args.chunk_ms / 1000
        tasks.append(client(args, pcm, order[0][1], stats, stop_at,
                            max(0.0, t_start - time.monotonic()) + rng.uniform(0, spread)))
    measure = asyncio.ensure_future(asyncio.gather(*tasks))
    await asyncio.sleep(max(0.0, t_start + args.warmup - time.monotonic()))
    stats["lat"].clear()
    stats["client_late"].clear()
    await measure
    return stats


def run_part(job):
    """One process's share of a level (--procs): its own event loop, its stats back to the parent."""
    args, pcms, n, first, count, t_start = job
    return asyncio.run(run_level(args, pcms, n, first, count, t_start))


def run_level_procs(args, pcms, n):
    """The level's clients spread over --procs processes (one Python event loop keeps up with a few
    hundred real-time streams, not thousands), started together; their stats merged."""
    import multiprocessing
    procs = min(args.procs, n)
    t_start = time.monotonic() + 1.0  # every process has started its loop by then
    jobs, first = [], 0
    for p in range(procs):
        count = n // procs + (1 if p < n % procs else 0)
        jobs.append((args, pcms, n, first, count, t_start))
        first += count
    with multiprocessing.get_context("fork").Pool(procs) as pool:
        parts = pool.map(run_part, jobs)
    stats = {"lat": [], "client_late": [], "partials": 0, "finals": 0, "chunks": 0, "errors": []}
    for st in parts:
        for k in stats:
            stats[k] += st[k]
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--streams", default="10,25,50,100")
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--chunk-ms", type=float, default=160)
    ap.add_argument("--win", type=int, default=400, help="frontend window in samples (model.yaml frontend.win_length)")
    ap.add_argument("--hop", type=int, default=160, help="frontend hop in samples")
    ap.add_argument("--procs", type=int, default=1, help="client processes (their event loops share the streams)")
    ap.add_argument("--open-rate", type=float, default=0,
                    help="streams opened per second at the start at most (0: all within one chunk's time)")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    pcms = load_pcm(args.files)
    args.hop_s = args.hop / pcms[0][1]
    print("streams  chunks  partials  finals  errors  latency_ms p50 / p90 / p99 / max   client_late_ms p99  load1")
    for n in [int(x) for x in args.streams.split(",")]:
        st = run_level_procs(args, pcms, n) if args.procs > 1 else asyncio.run(run_level(args, pcms, n))
        lat = [x * 1000 for x in st["lat"]]
        late = [x * 1000 for x in st["client_late"]]
        print("%7d  %6d  %8d  %6d  %6d  %8.1f / %5.1f / %5.1f / %6.1f   %8.1f           %.2f" %
              (n, st["chunks"], st["partials"], st["finals"], len(st["errors"]), pct(lat, 0.5), pct(lat, 0.9), pct(lat, 0.99),
               max(lat) if lat else float("nan"), pct(late, 0.99), os.getloadavg()[0]), flush=True)
        if st["errors"]:
            print("         errors, e.g.:", sorted(set(st["errors"]))[:5], flush=True)


if __name__ == "__main__":
    main()
