#!/usr/bin/env python3
"""soak.py — a long run of mixed traffic against rnntd, sampling the daemon every second (not in CI).

Valid clients send transcriptions back to back (.npy and JSON, the model's samples and random
utterances of 1-15 s, honouring Retry-After); malformed clients send every kind of bad request
(broken JSON, wrong width, NaN, truncated .npy, bad media type, oversized or missing length, bad
chunking, junk bytes, wrong methods and paths); slow clients trickle bodies and headers (some finish,
some give up half way). Every second the daemon's resident set (VmRSS), open file descriptors,
threads and the latency of the valid requests completed in that second go into a CSV; at the end a
summary (RSS start/end/max, fds, latency p50/p99, answers by status) is printed and written as JSON,
and the series are plotted into a PNG (matplotlib when importable, else a small built-in plotter
without text; the CSV has the numbers).

  tests/soak/soak.py --bin build/server/rnntd --model models/en-char-small --config conf/rnntd.yaml \
      --duration 3600 --out /tmp/soak                      # starts and stops the daemon itself
  tests/soak/soak.py --url http://127.0.0.1:8080 --pid PID --duration 600 --out /tmp/soak

Python standard library only (matplotlib optional). Exit status 0 when no request was lost (every
request got an answer or was closed on purpose by the server) and the daemon exited 0."""
import argparse
import array
import glob
import http.client
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib


# ------------------------------------------------------------------ inputs

def npy_bytes(rows, dim, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, dim)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + array.array("f", values).tobytes()


def read_npy_rows(path):
    data = open(path, "rb").read()
    hl = struct.unpack("<H", data[8:10])[0]
    hdr = data[10:10 + hl].decode()
    rows, cols = (int(x) for x in re.search(r"\((\d+),\s*(\d+)\)", hdr).groups())
    vals = array.array("f")
    vals.frombytes(data[10 + hl:10 + hl + rows * cols * 4])
    return rows, cols, list(vals)


def json_bytes(rows, dim, vals):
    return json.dumps({"features": [vals[t * dim:(t + 1) * dim] for t in range(rows)]}).encode()


# ------------------------------------------------------------------ shared state

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.codes = {}          # (kind, code) -> count, code an int or a string outcome
        self.lat = []            # (t_done, latency_s) of valid 200s
        self.client_errors = {}  # repr -> count (requests that got no answer)

    def add(self, kind, code, t_done=None, lat=None):
        with self.lock:
            self.codes[(kind, code)] = self.codes.get((kind, code), 0) + 1
            if lat is not None:
                self.lat.append((t_done, lat))

    def error(self, kind, e):
        with self.lock:
            k = "%s: %s" % (kind, type(e).__name__)
            self.client_errors[k] = self.client_errors.get(k, 0) + 1


def post(host, port, body, ctype, timeout=120, conn=None, headers=None):
    c = conn or http.client.HTTPConnection(host, port, timeout=timeout)
    h = {"Content-Type": ctype}
    h.update(headers or {})
    c.request("POST", "/v1/transcribe", body, h)
    r = c.getresponse()
    data = r.read()
    return c, r.status, r.getheader("Retry-After"), data


# ------------------------------------------------------------------ clients

def valid_client(args, host, port, dim, samples, stats, stop, seed):
    rnd = random.Random(seed)
    conn = None
    while not stop.is_set():
        if samples and rnd.random() < 0.5:
            rows, _, vals = rnd.choice(samples)
        else:
            rows = rnd.randint(100, 1500)
            vals = [round(rnd.gauss(-4.0, 2.5), 3) for _ in range(rows * dim)]
        as_json = rnd.random() < args.json_share
        body = json_bytes(rows, dim, vals) if as_json else npy_bytes(rows, dim, vals)
        t0 = time.monotonic()
        try:
            conn, st, ra, _ = post(host, port, body, "application/json" if as_json else "application/x-npy", conn=conn)
        except Exception as e:  # noqa: BLE001 - counted
            stats.error("valid", e)
            if conn:
                conn.close()
            conn = None
            continue
        t1 = time.monotonic()
        stats.add("valid", st, t1, t1 - t0 if st == 200 else None)
        if st == 503:
            stop.wait(min(float(ra or 1), 2.0))
    if conn:
        conn.close()


def malformed_cases(dim):
    ok_row = ",".join(["0.5"] * dim)
    npy_ok = npy_bytes(20, dim, [0.1] * (20 * dim))
    return [
        ("json_syntax", lambda h, p: post(h, p, b'{"features": [[1,2', "application/json")),
        ("json_shape", lambda h, p: post(h, p, b'{"features": "x"}', "application/json")),
        ("json_nan", lambda h, p: post(h, p, ('{"features": [[%s,NaN]]}' % ok_row).encode(), "application/json")),
        ("json_width", lambda h, p: post(h, p, b'{"features": [[1,2,3]]}', "application/json")),
        ("json_deep", lambda h, p: post(h, p, b"[" * 3000 + b"]" * 3000, "application/json")),
        ("json_unknown_key", lambda h, p: post(h, p, ('{"features": [[%s]], "x": 1}' % ok_row).encode(),
                                               "application/json")),
        ("npy_nan", lambda h, p: post(h, p, npy_bytes(2, dim, [float("nan")] * (2 * dim)), "application/x-npy")),
        ("npy_truncated", lambda h, p: post(h, p, npy_ok[:-7], "application/x-npy")),
        ("npy_width", lambda h, p: post(h, p, npy_bytes(2, dim + 1, [0.0] * (2 * dim + 2)), "application/x-npy")),
        ("npy_junk", lambda h, p: post(h, p, os.urandom(300), "application/x-npy")),
        ("media_type", lambda h, p: post(h, p, b"hello", "text/plain")),
        ("empty", lambda h, p: post(h, p, b"", "application/json")),
        ("oversized", lambda h, p: raw(h, p, b"POST /v1/transcribe HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                             b"application/x-npy\r\nContent-Length: 99999999999\r\n\r\n")),
        ("no_length", lambda h, p: raw(h, p, b"POST /v1/transcribe HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                             b"application/json\r\n\r\n")),
        ("bad_chunk", lambda h, p: raw(h, p, b"POST /v1/transcribe HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                            b"application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")),
        ("junk_bytes", lambda h, p: raw(h, p, os.urandom(200) + b"\r\n\r\n")),
        ("bad_path", lambda h, p: get(h, p, "/v2/nothing")),
        ("bad_method", lambda h, p: get(h, p, "/v1/transcribe")),
    ]


def raw(host, port, data, timeout=10):
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
    return None, int(m.group(1)) if m else "closed", None, got


def get(host, port, path):
    c = http.client.HTTPConnection(host, port, timeout=30)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return None, r.status, None, b""
    finally:
        c.close()


def malformed_client(args, host, port, dim, stats, stop, seed):
    rnd = random.Random(seed)
    cases = malformed_cases(dim)
    while not stop.is_set():
        name, fn = rnd.choice(cases)
        try:
            c, st, _, _ = fn(host, port)
            if c:
                c.close()
            stats.add("malformed", st)
        except Exception as e:  # noqa: BLE001
            stats.error("malformed:" + name, e)
        stop.wait(0.05)


def slow_client(args, host, port, dim, stats, stop, seed):
    rnd = random.Random(seed)
    while not stop.is_set():
        rows = rnd.randint(50, 300)
        body = npy_bytes(rows, dim, [round(rnd.gauss(-4, 2.5), 3) for _ in range(rows * dim)])
        give_up = rnd.random() < 0.3
        slow_head = rnd.random() < 0.3
        head = ("POST /v1/transcribe HTTP/1.1\r\nHost: soak\r\nContent-Type: application/x-npy\r\n"
                "Content-Length: %d\r\n\r\n" % len(body)).encode()
        try:
            s = socket.create_connection((host, port), timeout=60)
            if slow_head:  # one header line a second
                for line in head.split(b"\r\n")[:-1]:
                    s.sendall(line + b"\r\n")
                    stop.wait(1.0)
                    if stop.is_set():
                        break
            else:
                s.sendall(head)
            step = max(1, len(body) // 10)
            sent = 0
            for off in range(0, len(body), step):
                if give_up and off > len(body) // 2:
                    break
                s.sendall(body[off:off + step])
                sent += len(body[off:off + step])
                stop.wait(0.3)
            if give_up:
                s.close()
                stats.add("slow", "gave_up")
                continue
            got = b""
            while b"\r\n\r\n" not in got:
                d = s.recv(65536)
                if not d:
                    break
                got += d
            s.close()
            m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
            stats.add("slow", int(m.group(1)) if m else "closed")
        except Exception as e:  # noqa: BLE001
            stats.error("slow", e)


# ------------------------------------------------------------------ sampling

def proc_sample(pid):
    rss = threads = None
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024.0
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        fds = len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None, None, None
    return rss, fds, threads


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


# ------------------------------------------------------------------ plotting

def plot_png(path, rows, title):
    t = [r["t_s"] for r in rows]
    series = [("VmRSS (MB)", [r["rss_mb"] for r in rows]), ("open fds", [r["fds"] for r in rows]),
              ("valid latency p50 / p99 (ms)", [r["p50_ms"] for r in rows], [r["p99_ms"] for r in rows]),
              ("answers per second: 200 / 503 / 4xx", [r["n_200"] for r in rows], [r["n_503"] for r in rows],
               [r["n_4xx"] for r in rows])]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(len(series), 1, figsize=(11, 10), sharex=True)
        for ax, s in zip(axes, series):
            for i, ys in enumerate(s[1:]):
                ax.plot(t, ys, lw=0.8)
            ax.set_ylabel(s[0], fontsize=8)
            ax.grid(alpha=0.3)
        axes[-1].set_xlabel("seconds")
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        return "matplotlib"
    except ImportError:
        pass
    # A small PNG without text: one panel per series, zero-based y axes, lines in colours.
    W, PH, M = 1000, 180, 10
    H = PH * len(series)
    img = bytearray(b"\xff" * (W * H * 3))
    colours = [(31, 119, 180), (214, 39, 40), (44, 160, 44)]

    def put(x, y, c):
        if 0 <= x < W and 0 <= y < H:
            i = (y * W + x) * 3
            img[i:i + 3] = bytes(c)

    tmax = max(t) if t else 1
    for k, s in enumerate(series):
        y0 = k * PH
        for x in range(M, W - M):
            put(x, y0 + PH - M, (0, 0, 0))
        for y in range(y0 + M, y0 + PH - M):
            put(M, y, (0, 0, 0))
        vals = [v for ys in s[1:] for v in ys if v == v]
        vmax = max(vals) if vals else 1
        vmax = vmax or 1
        for ci, ys in enumerate(s[1:]):
            prev = None
            for tt, v in zip(t, ys):
                if v != v:
                    prev = None
                    continue
                x = M + int((W - 2 * M) * tt / (tmax or 1))
                y = y0 + PH - M - int((PH - 2 * M) * v / vmax)
                if prev:
                    px, py = prev
                    n = max(abs(x - px), abs(y - py), 1)
                    for j in range(n + 1):
                        put(px + (x - px) * j // n, py + (y - py) * j // n, colours[ci % 3])
                prev = (x, y)
    raw_rows = b"".join(b"\x00" + bytes(img[y * W * 3:(y + 1) * W * 3]) for y in range(H))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw_rows, 9)) + chunk(b"IEND", b""))
    return "builtin (no text; panels top to bottom: " + "; ".join(s[0] for s in series) + ")"


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="start this rnntd binary (with --model, --config)")
    ap.add_argument("--model", default="models/en-char-small")
    ap.add_argument("--config", default="conf/rnntd.yaml")
    ap.add_argument("--url", help="an already running daemon (with --pid for its RSS and fds)")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--duration", type=float, default=3600)
    ap.add_argument("--out", default="soak-out")
    ap.add_argument("--valid", type=int, default=8, help="valid clients")
    ap.add_argument("--malformed", type=int, default=2, help="malformed-request clients")
    ap.add_argument("--slow", type=int, default=3, help="slow clients")
    ap.add_argument("--json-share", type=float, default=0.3, help="share of valid bodies sent as JSON")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    proc = None
    if args.bin:
        logf = open(os.path.join(args.out, "rnntd.log"), "wb")
        proc = subprocess.Popen([args.bin, "--config", args.config, "--model", args.model, "--listen", "127.0.0.1",
                                 "--port", "0"], stdout=subprocess.DEVNULL, stderr=logf)
        host, port, pid = "127.0.0.1", None, proc.pid
        end = time.monotonic() + 60
        while port is None and time.monotonic() < end:
            m = re.search(r"msg=listening address=\S+ port=(\d+)", open(os.path.join(args.out, "rnntd.log")).read())
            port = int(m.group(1)) if m else None
            time.sleep(0.05)
        if port is None:
            sys.exit("rnntd did not start: see %s/rnntd.log" % args.out)
    else:
        m = re.match(r"http://([^:/]+):(\d+)", args.url or "")
        if not m:
            sys.exit("give --bin or --url")
        host, port, pid = m.group(1), int(m.group(2)), args.pid
    end = time.monotonic() + 120
    health = None
    while time.monotonic() < end:
        try:
            c = http.client.HTTPConnection(host, port, timeout=5)
            c.request("GET", "/health")
            r = c.getresponse()
            health = json.loads(r.read())
            if health.get("ready"):
                break
        except OSError:
            pass
        time.sleep(0.2)
    dim = health["model"]["feature_dim"]
    samples = []
    if os.path.isdir(os.path.join(args.model, "samples")):
        samples = [read_npy_rows(p) for p in sorted(glob.glob(os.path.join(args.model, "samples", "*.npy")))]
        samples = [s for s in samples if s[1] == dim]

    stats, stop = Stats(), threading.Event()
    threads = []
    for i in range(args.valid):
        threads.append(threading.Thread(target=valid_client, args=(args, host, port, dim, samples, stats, stop,
                                                                   args.seed * 1000 + i), daemon=True))
    for i in range(args.malformed):
        threads.append(threading.Thread(target=malformed_client, args=(args, host, port, dim, stats, stop,
                                                                       args.seed * 2000 + i), daemon=True))
    for i in range(args.slow):
        threads.append(threading.Thread(target=slow_client, args=(args, host, port, dim, stats, stop,
                                                                  args.seed * 3000 + i), daemon=True))
    t_start = time.monotonic()
    rows = []
    csv_path = os.path.join(args.out, "soak.csv")
    cols = ["t_s", "rss_mb", "fds", "threads", "valid_done", "p50_ms", "p99_ms", "n_200", "n_503", "n_4xx",
            "n_5xx_other", "client_errors"]
    csv = open(csv_path, "w")
    csv.write(",".join(cols) + "\n")
    for t in threads:
        t.start()
    last_codes, last_err, lat_i = {}, 0, 0
    next_t = t_start + 1
    while time.monotonic() < t_start + args.duration:
        time.sleep(max(0, next_t - time.monotonic()))
        next_t += 1
        rss, fds, nthr = proc_sample(pid) if pid else (None, None, None)
        with stats.lock:
            lat = [l for _, l in stats.lat[lat_i:]]
            lat_i = len(stats.lat)
            codes = dict(stats.codes)
            errs = sum(stats.client_errors.values())
        delta = {}
        for (kind, code), n in codes.items():
            delta[code] = delta.get(code, 0) + n - last_codes.get((kind, code), 0)
        last_codes = codes
        row = {"t_s": round(time.monotonic() - t_start, 2), "rss_mb": rss, "fds": fds, "threads": nthr,
               "valid_done": len(lat), "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3,
               "n_200": delta.get(200, 0), "n_503": delta.get(503, 0),
               "n_4xx": sum(n for c, n in delta.items() if isinstance(c, int) and 400 <= c < 500),
               "n_5xx_other": sum(n for c, n in delta.items() if isinstance(c, int) and c >= 500 and c != 503),
               "client_errors": errs - last_err}
        last_err = errs
        rows.append(row)
        csv.write(",".join("" if row[c] is None else ("%.3f" % row[c] if isinstance(row[c], float) else str(row[c]))
                           for c in cols) + "\n")
        csv.flush()
    stop.set()
    for t in threads:
        t.join(90)
    csv.close()
    exit_status = None
    if proc:
        proc.send_signal(signal.SIGTERM)
        try:
            exit_status = proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            exit_status = "killed"
    valid_rss = [r["rss_mb"] for r in rows if r["rss_mb"] is not None]
    valid_fds = [r["fds"] for r in rows if r["fds"] is not None]
    all_lat = [l for _, l in stats.lat]
    by_code = {}
    for (kind, code), n in sorted(stats.codes.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        by_code.setdefault(kind, {})[str(code)] = n
    summary = {
        "duration_s": args.duration, "clients": {"valid": args.valid, "malformed": args.malformed, "slow": args.slow},
        "rss_mb": {"start": valid_rss[0] if valid_rss else None, "end": valid_rss[-1] if valid_rss else None,
                   "max": max(valid_rss) if valid_rss else None},
        "fds": {"start": valid_fds[0] if valid_fds else None, "end": valid_fds[-1] if valid_fds else None,
                "max": max(valid_fds) if valid_fds else None},
        "valid_latency_ms": {"n": len(all_lat), "p50": pct(all_lat, 50) * 1e3, "p99": pct(all_lat, 99) * 1e3,
                             "max": max(all_lat) * 1e3 if all_lat else None},
        "answers": by_code, "client_errors": stats.client_errors, "daemon_exit_status": exit_status,
    }
    summary["plot"] = plot_png(os.path.join(args.out, "soak.png"), rows,
                               "rnntd soak: %.0f s, %d valid / %d malformed / %d slow clients" %
                               (args.duration, args.valid, args.malformed, args.slow))
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    lost = sum(n for k, n in stats.client_errors.items() if k.startswith("valid"))
    return 0 if lost == 0 and exit_status in (0, None) else 1


if __name__ == "__main__":
    sys.exit(main())
