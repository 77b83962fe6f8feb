#!/usr/bin/env python3
"""nsys_gaps.py — where the GPU idles in an nsys report (its SQLite export), and what the host did meanwhile.

    python3 nsys_gaps.py REPORT.sqlite [--min-gap-ms 0.2] [--timeline FILE]

Compute = kernels, whole-graph executions (--cuda-graph-trace=graph), memsets and device-to-device copies, on any
stream; a gap is a stretch with none of them. For each gap: its length, how much of it a host-to-device copy was in
flight, and the CUDA runtime calls that overlapped it (the host thread waiting in cudaEventSynchronize is waiting on
the GPU or a copy; no call at all means the host was busy on its own: staging, unpacking). Prints a summary by cause
and, with --timeline, writes every busy stretch (its graphs over 1 ms: length and stream) and gap in order."""
import argparse
import collections
import sqlite3
import sys


def tables(db):
    return {r[0] for r in db.execute("select name from sqlite_master where type='table'")}


def merge(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


def overlap(a, b, lst):
    """total overlap of [a, b) with the sorted, merged intervals lst"""
    t = 0
    for x, y in lst:
        if y <= a:
            continue
        if x >= b:
            break
        t += min(b, y) - max(a, x)
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--min-gap-ms", type=float, default=0.2)
    ap.add_argument("--timeline")
    a = ap.parse_args()
    db = sqlite3.connect(a.db)
    have = tables(db)
    names = dict(db.execute("select id, value from StringIds")) if "StringIds" in have else {}
    comp, graphs, h2d = [], [], []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
        comp += db.execute("select start, end from CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in have:
        graphs = db.execute("select start, end, streamId from CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchall()
        comp += [(s, e) for s, e, _ in graphs]
    if "CUPTI_ACTIVITY_KIND_MEMSET" in have:
        comp += db.execute("select start, end from CUPTI_ACTIVITY_KIND_MEMSET").fetchall()
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in have:
        for s, e, kind, nbytes in db.execute("select start, end, copyKind, bytes from CUPTI_ACTIVITY_KIND_MEMCPY"):
            if kind == 1:
                h2d.append((s, e, nbytes))
            elif kind == 8:
                comp.append((s, e))
    if not comp:
        sys.exit("no GPU activity in " + a.db)
    busy = merge(comp)
    h2d_m = merge([(s, e) for s, e, _ in h2d])
    api = []
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in have:
        api = db.execute("select start, end, nameId, globalTid from CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
        api.sort()
    t0, t1 = busy[0][0], busy[-1][1]
    gaps = [(busy[i][1], busy[i + 1][0]) for i in range(len(busy) - 1)
            if busy[i + 1][0] - busy[i][1] >= a.min_gap_ms * 1e6]
    by_cause = collections.Counter()
    n_cause = collections.Counter()
    rows = []
    j = 0
    for gs, ge in gaps:
        while j < len(api) and api[j][1] < gs - 10**9:  # calls over a second before the gap cannot overlap it
            j += 1
        calls = collections.Counter()
        for s, e, nid, tid in api[j:]:
            if s >= ge:
                break
            o = min(e, ge) - max(s, gs)
            if o > 0:
                calls[names.get(nid, str(nid)).split("_v")[0]] += o
        up = overlap(gs, ge, h2d_m)
        top = calls.most_common(1)
        dur = ge - gs
        if top and top[0][1] > 0.5 * dur:
            cause = "host in " + top[0][0] + (" (H2D in flight)" if up > 0.5 * dur else "")
        else:
            cause = "host outside CUDA calls" + (" (H2D in flight)" if up > 0.5 * dur else "")
        by_cause[cause] += dur
        n_cause[cause] += 1
        rows.append((gs, ge, up, calls))
    tot = t1 - t0
    idle = sum(ge - gs for gs, ge in gaps)
    print(f"span {tot / 1e6:.1f} ms, compute busy {sum(e - s for s, e in busy) / 1e6:.1f} ms, "
          f"{len(gaps)} gaps >= {a.min_gap_ms} ms totalling {idle / 1e6:.1f} ms; H2D copies {len(h2d)} "
          f"({sum(b for _, _, b in h2d) / 1e9:.2f} GB, {sum(e - s for s, e in h2d_m) / 1e6:.1f} ms in flight)")
    for cause, d in by_cause.most_common():
        print(f"  {d / 1e6:9.1f} ms in {n_cause[cause]:4d} gaps: {cause}")
    big = sorted(((e - s, s, st) for s, e, st in graphs if e - s > 1e6), reverse=True)
    if big:
        per_stream = collections.defaultdict(list)
        for d, s, st in big:
            per_stream[st].append(d / 1e6)
        for st, ds in sorted(per_stream.items()):
            ds.sort()
            print(f"  graphs over 1 ms on stream {st}: {len(ds)}, median {ds[len(ds) // 2]:.2f} ms, "
                  f"min {ds[0]:.2f}, max {ds[-1]:.2f}")
    if a.timeline:
        gi = 0
        graphs.sort()
        with open(a.timeline, "w") as f:
            f.write("# t ms (from the first GPU work) | busy stretch ms [graphs > 1 ms: ms@stream] | then gap ms, "
                    "H2D ms in it, host calls in it (ms)\n")
            gap_at = {round(gs): (gs, ge, up, calls) for gs, ge, up, calls in rows}
            start = busy[0][0]
            for i, (s, e) in enumerate(busy):
                if i + 1 < len(busy) and busy[i + 1][0] - e < a.min_gap_ms * 1e6:
                    continue  # still the same stretch
                gl = []
                while gi < len(graphs) and graphs[gi][0] < e:
                    if graphs[gi][1] - graphs[gi][0] > 1e6:
                        gl.append(f"{(graphs[gi][1] - graphs[gi][0]) / 1e6:.1f}@{graphs[gi][2]}")
                    gi += 1
                line = f"{(start - t0) / 1e6:10.2f} | busy {(e - start) / 1e6:8.2f} [{' '.join(gl)}]"
                g = gap_at.get(round(e))
                if g:
                    gs, ge, up, calls = g
                    line += (f" | gap {(ge - gs) / 1e6:.2f}, H2D {up / 1e6:.2f}, "
                             + ", ".join(f"{n} {o / 1e6:.2f}" for n, o in calls.most_common(3)))
                    start = ge
                f.write(line + "\n")


if __name__ == "__main__":
    main()
