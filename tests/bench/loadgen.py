#!/usr/bin/env python3
"""loadgen — closed-loop load generator for rnntd (Python standard library only).

N client threads, each with its own keep-alive connection, send POST /v1/transcribe back to back for a
duration or a number of requests, then report throughput (requests/s and audio seconds per second),
latency percentiles, status counts and the server's own batching figures (from /metrics, before and
after), and the medians of the answers' own `timings` (queue, compute, total in the server: the rest of
a request's latency is the client's and the connection's).

  tests/bench/loadgen.py --url http://127.0.0.1:8080 --concurrency 16 --duration 20 FILE.npy...
  tests/bench/loadgen.py --url http://127.0.0.1:8080 --frames 500 --utterances 8 --requests 2000

Inputs: .npy feature files (sent as application/x-npy), or --frames N random utterances of the
model's feature width (read from /health), --utterances of them with lengths spread over
[N/2, 3N/2]. Exit status: 0 when every request got 200, 1 otherwise, 2 usage.
"""
import argparse
import array
import http.client
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


def npy_bytes(rows, dim, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, dim)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + array.array("f", values).tobytes()


def percentile(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    k = (len(sorted_vals) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def scrape(host, port, headers):
    c = http.client.HTTPConnection(host, port, timeout=30)
    try:
        c.request("GET", "/metrics", headers=headers)
        r = c.getresponse()
        text = r.read().decode()
    finally:
        c.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def run_loadc(a, host, port, raw_reqs, headers, tally, errors):
    """--client c: the prepared requests go to loadc (tests/bench/loadc.c) in files; each answer line goes to
    tally(status, latency_s, duration_s, batch_size, timings) as the Python clients' answers do.
    Returns (metrics before, metrics after, measured seconds, client CPU s)."""
    prog = a.loadc or os.environ.get("RNNTD_LOADC") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "tests", "bench", "loadc")
    if not os.access(prog, os.X_OK):
        print("loadgen: --client c needs the loadc program (%s): build it, or name it with --loadc" % prog, file=sys.stderr)
        return None, None, 0, 0
    with tempfile.TemporaryDirectory(prefix="loadgen-") as tmp:
        files = []
        for i, r in enumerate(raw_reqs):
            files.append(os.path.join(tmp, "req%d" % i))
            with open(files[-1], "wb") as f:
                f.write(r)
        addr = socket.gethostbyname(host)
        p = subprocess.Popen([prog, addr, str(port), str(a.concurrency), str(max(a.warmup, 0.0)), str(a.duration),
                              str(a.timeout)] + files, stdout=subprocess.PIPE, text=True)
        if a.warmup > 0:
            time.sleep(a.warmup)
        m0 = scrape(host, port, headers)
        out, _ = p.communicate()
        m1 = scrape(host, port, headers)
    cpu = 0.0
    for line in out.splitlines():
        f = line.split(" ", 1)
        if f[0] == "R":
            st, dt, dur, bs, q, c, t = f[1].split()
            timings = {k: float(v) for k, v in zip(("queue_ms", "compute_ms", "total_ms"), (q, c, t)) if float(v) >= 0}
            tally(int(st), float(dt), float(dur), float(bs), timings)
        elif f[0] == "E":
            errors.append(f[1] if len(f) > 1 else "error")
        elif f[0] == "C":
            cpu = float(f[1])
    if p.returncode not in (0, 1):
        errors.append("loadc exit %d" % p.returncode)
    return m0, m1, a.duration, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help=".npy feature files to send (round robin)")
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("-c", "--concurrency", type=int, default=8)
    ap.add_argument("-d", "--duration", type=float, default=None, help="seconds to run (default 10)")
    ap.add_argument("-n", "--requests", type=int, default=None, help="total requests instead of a duration")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of load before measuring")
    ap.add_argument("--frames", type=int, default=300, help="random utterances: mean length in frames")
    ap.add_argument("--utterances", type=int, default=8, help="random utterances: how many distinct ones")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--token-file", help="bearer token for servers with authentication")
    ap.add_argument("--json", action="store_true", help="print the report as one JSON object")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-request timeout in seconds")
    ap.add_argument("--client", choices=["http", "raw", "c"], default="http",
                    help="http: http.client; raw: one prepared send per request and a minimal reader of the "
                         "answer (Content-Length only): less client CPU per request (0.47 -> 0.32 ms measured with 30 KB answers); "
                         "c: the same requests from tests/bench/loadc.c (every client on one epoll thread; --loadc; duration only)")
    ap.add_argument("--loadc", default=None, help="the loadc program for --client c (default: $RNNTD_LOADC, "
                    "else build/tests/bench/loadc beside this checkout)")
    a = ap.parse_args()
    if a.concurrency < 1 or (a.requests is not None and a.requests < 1):
        ap.error("concurrency and requests must be positive")
    if a.duration is None and a.requests is None:
        a.duration = 10.0
    if a.client == "c" and a.requests is not None:
        ap.error("--client c runs for a --duration, not a number of --requests")

    u = urllib.parse.urlsplit(a.url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    headers = {}
    if a.token_file:
        with open(a.token_file) as f:
            headers["Authorization"] = "Bearer " + f.readline().strip()

    c = http.client.HTTPConnection(host, port, timeout=30)
    c.request("GET", "/health")
    health = json.loads(c.getresponse().read())
    c.close()
    if not health.get("ready"):
        print("loadgen: the server is not ready: %s" % health.get("status"), file=sys.stderr)
        return 2
    dim = health["model"]["feature_dim"]
    bodies = []
    if a.files:
        for p in a.files:
            with open(p, "rb") as f:
                bodies.append(f.read())
    else:
        r = random.Random(a.seed)
        for i in range(a.utterances):
            n = max(1, int(a.frames * (0.5 + i / max(1, a.utterances - 1)))) if a.utterances > 1 else a.frames
            bodies.append(npy_bytes(n, dim, [r.gauss(-4.0, 2.5) for _ in range(n * dim)]))

    lock = threading.Lock()
    state = {"measuring": a.warmup <= 0, "stop": False, "sent": 0}
    lat, audio, batch, statuses, errors = [], [], [], {}, []
    srv_t = {"queue_ms": [], "compute_ms": [], "total_ms": []}

    def take_ticket():
        with lock:
            if state["stop"]:
                return False
            if a.requests is not None and state["measuring"]:
                if state["sent"] >= a.requests:
                    return False
                state["sent"] += 1
            return True

    raw_reqs = []
    if a.client in ("raw", "c"):
        head = "POST /v1/transcribe HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/x-npy\r\n" % (host, port)
        head += "".join("%s: %s\r\n" % kv for kv in headers.items())
        raw_reqs = [(head + "Content-Length: %d\r\n\r\n" % len(b)).encode() + b for b in bodies]

    def raw_client(k):
        """The same loop as client() over a bare socket: the answer's head must carry Content-Length
        (rnntd's always does); anything else counts as a connection error."""
        sock, buf = None, bytearray()
        i = k
        while take_ticket():
            req = raw_reqs[i % len(raw_reqs)]
            i += a.concurrency
            measuring = state["measuring"]
            t0 = time.monotonic()
            try:
                if sock is None:
                    sock = socket.create_connection((host, port), timeout=a.timeout)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    buf = bytearray()
                sock.sendall(req)
                while True:
                    e = buf.find(b"\r\n\r\n")
                    if e >= 0:
                        break
                    chunk = sock.recv(65536)
                    if not chunk:
                        raise ConnectionError("closed before the answer's head")
                    buf += chunk
                hd = bytes(buf[:e]).decode("latin-1").split("\r\n")
                st = int(hd[0].split(" ", 2)[1])
                clen = None
                for line in hd[1:]:
                    name, _, val = line.partition(":")
                    if name.strip().lower() == "content-length":
                        clen = int(val)
                if clen is None:
                    raise ConnectionError("answer without Content-Length")
                end = e + 4 + clen
                while len(buf) < end:
                    chunk = sock.recv(max(65536, end - len(buf)))
                    if not chunk:
                        raise ConnectionError("closed in the answer's body")
                    buf += chunk
                data = bytes(buf[e + 4:end])
                del buf[:end]
                if any(line.lower().startswith("connection: close") for line in hd[1:]):
                    sock.close()
                    sock = None
            except (OSError, ValueError, ConnectionError) as ex:
                if sock is not None:
                    sock.close()
                sock = None
                with lock:
                    if measuring:
                        errors.append(repr(ex))
                continue
            dt = time.monotonic() - t0
            if not measuring:
                continue
            record(st, data, dt)
        if sock is not None:
            sock.close()

    def tally(st, dt, duration_s=None, batch_size=None, timings=None):
        """One measured answer: its status, and for a 200 its latency, audio, batch and server timings."""
        with lock:
            statuses[st] = statuses.get(st, 0) + 1
            if st == 200:
                lat.append(dt)
                audio.append(duration_s)
                batch.append(batch_size)
                for k, v in srv_t.items():
                    v.append(timings.get(k, float("nan")))

    def record(st, data, dt):
        if st != 200:
            return tally(st, dt)
        doc = json.loads(data)
        tally(st, dt, doc["duration_s"], doc["batch_size"], doc.get("timings", {}))

    def client(k):
        conn = http.client.HTTPConnection(host, port, timeout=a.timeout)
        i = k
        h = dict(headers)
        h["Content-Type"] = "application/x-npy"
        while take_ticket():
            body = bodies[i % len(bodies)]
            i += a.concurrency
            measuring = state["measuring"]
            t0 = time.monotonic()
            try:
                conn.request("POST", "/v1/transcribe", body=body, headers=h)
                r = conn.getresponse()
                data = r.read()
                st = r.status
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=a.timeout)
                with lock:
                    if measuring:
                        errors.append(repr(e))
                continue
            dt = time.monotonic() - t0
            if not measuring:
                continue
            record(st, data, dt)
        conn.close()

    if a.client == "c":
        m0, m1, elapsed, client_cpu = run_loadc(a, host, port, raw_reqs, headers, tally, errors)
        if m0 is None:
            return 2
    else:
        target = raw_client if a.client == "raw" else client
        threads = [threading.Thread(target=target, args=(k,), daemon=True) for k in range(a.concurrency)]
        for t in threads:
            t.start()
        if a.warmup > 0:
            time.sleep(a.warmup)
        m0 = scrape(host, port, headers)
        with lock:
            state["measuring"] = True
        t_start = time.monotonic()
        cpu0 = time.process_time()
        if a.requests is None:
            time.sleep(a.duration)
            with lock:
                state["stop"] = True
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t_start
        client_cpu = time.process_time() - cpu0
        m1 = scrape(host, port, headers)

    lat.sort()
    n_ok = len(lat)
    for v in srv_t.values():
        v.sort()
    d = lambda k: m1.get(k, 0) - m0.get(k, 0)  # noqa: E731
    batches = d("rnntd_batches_total")
    rep = {
        "url": a.url, "model": health["model"]["name"], "backend": health["backend"], "device": health["device"],
        "concurrency": a.concurrency, "seconds": round(elapsed, 3), "requests_ok": n_ok,
        "statuses": {str(k): v for k, v in sorted(statuses.items())}, "connection_errors": len(errors),
        "requests_per_s": round(n_ok / elapsed, 2) if elapsed > 0 else 0,
        "audio_s_per_s": round(sum(audio) / elapsed, 2) if elapsed > 0 else 0,
        "mean_audio_s": round(sum(audio) / n_ok, 3) if n_ok else 0,
        "latency_ms": {"p50": round(percentile(lat, 50) * 1e3, 2), "p90": round(percentile(lat, 90) * 1e3, 2),
                       "p99": round(percentile(lat, 99) * 1e3, 2), "max": round(lat[-1] * 1e3, 2) if lat else None},
        "mean_batch_size": round(sum(batch) / len(batch), 2) if batch else 0,
        "client": a.client, "client_cpu_ms_per_request": round(client_cpu * 1e3 / n_ok, 3) if n_ok else None,
        "server_timings_ms_p50": {k: round(percentile(v, 50), 3) for k, v in srv_t.items()},
        "server": {"batches": int(batches),
                   "mean_batch_size": round(d("rnntd_batch_utterances_total") / batches, 2) if batches else 0,
                   "compute_s": round(d("rnntd_compute_seconds_total"), 3),
                   "real_time_factor": round(d("rnntd_compute_seconds_total") / d("rnntd_audio_seconds_total"), 5)
                   if d("rnntd_audio_seconds_total") > 0 else 0,
                   "padding_share": round(d("rnntd_padding_frames_total") /
                                          (d("rnntd_frames_total") + d("rnntd_padding_frames_total")), 3)
                   if d("rnntd_frames_total") > 0 else 0},
    }
    if a.json:
        print(json.dumps(rep))
    else:
        L = rep["latency_ms"]
        print("rnntd %s  model %s  backend %s (%s)" % (a.url, rep["model"], rep["backend"], rep["device"]))
        print("  %d clients, %.1f s: %d ok, statuses %s, connection errors %d" %
              (a.concurrency, elapsed, n_ok, rep["statuses"], len(errors)))
        print("  throughput  %.1f requests/s, %.1f audio s/s (mean utterance %.2f s)" %
              (rep["requests_per_s"], rep["audio_s_per_s"], rep["mean_audio_s"]))
        print("  latency     p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  max %s ms" % (L["p50"], L["p90"], L["p99"], L["max"]))
        print("  client      %s, %s ms of its CPU per request" % (a.client, rep["client_cpu_ms_per_request"]))
        T = rep["server_timings_ms_p50"]
        print("  in server   p50 queue %.2f ms  compute %.2f ms  total %.2f ms (head to reply)" %
              (T["queue_ms"], T["compute_ms"], T["total_ms"]))
        s = rep["server"]
        print("  server      %d batches, mean batch %.2f, compute %.2f s, RTF %.4f, padding %.1f%%" %
              (s["batches"], s["mean_batch_size"], s["compute_s"], s["real_time_factor"], 100 * s["padding_share"]))
    ok = n_ok > 0 and not errors and set(statuses) <= {200}
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
