#!/usr/bin/env python3
"""Measures the HTTP edge of a running-from-here rnntd (issue 11): a slow-header attack against a
normal client's latency, smuggling probes, unknown transfer codings, the connection cap, and the cost
of idle connections (RSS and descriptors). Prints what it saw; asserts nothing (not part of CI).

  PYTHONPATH=tests/server tests/bench/http_edge.py --bin build/server/rnntd --model tests/data/golden/hard_bb
      [--config FILE] [--slow 300 --every 5 --duration 30] [--idle 4000] [--cap-probe 50]

The daemon is started here (loopback, a free port, CPU backend) and stopped at the end."""
import argparse
import json
import os
import random
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

try:    # the server tests' harness and test_edge's send-and-read-until-close, from PYTHONPATH=tests/server
    from harness import json_body, model_info, random_features
    from test_edge import exchange
except ImportError as e:
    sys.exit("http_edge.py: %s: run it with PYTHONPATH=tests/server (it shares the server tests' code)" % e)


def start(binary, model, config):
    d = tempfile.mkdtemp(prefix="rnntd-edge-")
    log = open(os.path.join(d, "stderr.log"), "wb")
    cmd = [binary, "--listen", "127.0.0.1", "--port", "0", "--model", model, "--backend", "cpu"]
    if config:
        cmd += ["--config", config]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    end = time.monotonic() + 30
    port = None
    while time.monotonic() < end and port is None:
        m = re.search(r"msg=listening address=\S+ port=(\d+)", open(log.name).read())
        port = int(m.group(1)) if m else None
        time.sleep(0.05)
    while time.monotonic() < end:
        try:
            if request(port, b"GET /health/ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 2)[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.05)
    return p, port, log.name


def request(port, data, timeout=5.0):
    """(status or None, bytes, seconds) of one request on a new connection."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        got = b""
        while True:
            try:
                d = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not d:
                break
            got += d
            if b"\r\n\r\n" in got:
                head, _, body = got.partition(b"\r\n\r\n")
                m = re.search(rb"(?i)content-length: *(\d+)", head)
                if m and len(body) >= int(m.group(1)):
                    break
        m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
        return (int(m.group(1)) if m else None), got, time.monotonic() - t0
    finally:
        s.close()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def slowloris(port, body, n, every, duration):
    """n connections each sending one header line every `every` s (reconnecting when closed), while
    a normal client sends a transcription every 0.25 s with a 10 s timeout."""
    stop = threading.Event()
    socks = [None] * n
    stats = {"opened": 0, "closed_by_server": 0, "answers": {}}

    def open_one(i):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.setblocking(False)
            s.send(b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\n")
            socks[i] = s
            stats["opened"] += 1
        except OSError:
            socks[i] = None

    def attacker():
        for i in range(n):
            open_one(i)
        k = 0
        while not stop.wait(every):
            k += 1
            for i in range(n):
                s = socks[i]
                if s is not None:
                    try:
                        d = s.recv(4096)
                        if d == b"" or d:
                            m = re.match(rb"HTTP/1\.[01] (\d{3})", d or b"")
                            st = int(m.group(1)) if m else "close"
                            stats["answers"][st] = stats["answers"].get(st, 0) + 1
                            stats["closed_by_server"] += 1
                            s.close()
                            s = None
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                        s = None
                if s is None:
                    open_one(i)
                    continue
                try:
                    s.send(b"X-Slow-%d: %d\r\n" % (k, random.randrange(1 << 30)))
                except OSError:
                    pass

    t = threading.Thread(target=attacker, daemon=True)
    t.start()
    time.sleep(min(2.0, every))
    lat, fails = [], 0
    req = (b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nConnection: close\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    end = time.monotonic() + duration
    while time.monotonic() < end:
        try:
            st, _, dt = request(port, req, 10)
        except OSError:
            st, dt = None, 10.0
        if st == 200:
            lat.append(dt * 1e3)
        else:
            fails += 1
        time.sleep(0.25)
    stop.set()
    t.join(every + 5)
    for s in socks:
        if s is not None:
            s.close()
    return lat, fails, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--config", default="")
    ap.add_argument("--slow", type=int, default=300)
    ap.add_argument("--every", type=float, default=5.0)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--idle", type=int, default=4000)
    ap.add_argument("--cap-probe", type=int, default=0, help="connections over max_connections to open")
    ap.add_argument("--skip", default="", help="comma list of: slowloris,smuggle,codings,idle,cap")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    info = model_info(a.model)
    body = json_body(9, info["feature_dim"], random_features(9, info["feature_dim"], 11))
    p, port, logpath = start(a.bin, a.model, a.config)
    print("daemon %s pid %d port %d; RSS %d KiB, %d fds at start" % (a.bin, p.pid, port, rss_kib(p.pid), fds(p.pid)))
    try:
        base = []
        for _ in range(20):
            st, _, dt = request(port, (b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                                       b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)) + body)
            base.append(dt * 1e3)
        print("normal request, no attack: p50 %.1f ms, max %.1f ms (20 requests)" % (statistics.median(base), max(base)))

        if "slowloris" not in skip:
            lat, fails, stats = slowloris(port, body, a.slow, a.every, a.duration)
            print("slowloris: %d connections, a header line every %.1f s, %.0f s: normal client %d ok, %d failed "
                  "or timed out (10 s); latency p50 %.1f / p90 %.1f / max %.1f ms; attacker connections closed by "
                  "the server %d, answers %s" % (a.slow, a.every, a.duration, len(lat), fails,
                                                 pct(lat, 0.5), pct(lat, 0.9), max(lat) if lat else float("nan"),
                                                 stats["closed_by_server"], stats["answers"]))
            time.sleep(1)

        if "smuggle" not in skip:
            smug = b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"
            probes = {
                "CL+TE": b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % (5 + len(smug)) + smug,
                "CL,CL differing": b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(smug) + smug,
                "bare LF": b"GET /health/live HTTP/1.1\nHost: t\n\n",
                "obs-fold": b"GET /health/live HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n",
            }
            for name, data in probes.items():
                got, closed, dt = exchange(port, data, read_timeout=3.0)
                codes = re.findall(rb"HTTP/1\.[01] (\d{3})", got)
                print("probe %-16s answers %s, closed by the server: %s, after %.0f ms, smuggled /metrics ran: %s" % (
                    name, [c.decode() for c in codes], closed, dt * 1e3, b"rnntd_" in got))

        if "codings" not in skip:
            for te in ("xchunked", "chunked, identity", "identity, chunked"):
                data = (b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                        b"Transfer-Encoding: %s\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % te.encode())
                st, got, dt = request(port, data, 40)
                print("Transfer-Encoding %-18s -> %s after %.0f ms" % (te, st, dt * 1e3))

        if "idle" not in skip and a.idle:
            r0, f0 = rss_kib(p.pid), fds(p.pid)
            idle = []
            t0 = time.monotonic()
            for i in range(a.idle):
                try:
                    idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                except OSError as e:
                    print("idle: connection %d failed: %s" % (i, e))
                    break
            time.sleep(1.0)
            r1, f1 = rss_kib(p.pid), fds(p.pid)
            st, _, dt = request(port, (b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                                       b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)) + body, 10)
            refused = sum(1 for s in idle[-50:] if _peek_closed(s))
            print("idle: %d connections opened in %.1f s; daemon RSS %d -> %d KiB (+%.2f KiB each), fds %d -> %d; "
                  "a normal request meanwhile: %s in %.1f ms; of the last 50 opened, %d were closed by the server" % (
                      len(idle), time.monotonic() - t0, r0, r1, (r1 - r0) / max(1, len(idle)), f0, f1, st, dt * 1e3, refused))
            for s in idle:
                s.close()
            time.sleep(1.0)

        if "cap" not in skip and a.cap_probe:
            socks, answers, t0 = [], {}, time.monotonic()
            for _ in range(a.cap_probe):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                except OSError:
                    break
            for s in socks:
                s.settimeout(0.02)
            time.sleep(1.5)
            for s in socks:
                try:
                    d = s.recv(4096)
                    k = re.match(rb"HTTP/1\.[01] (\d{3})", d).group(1).decode() if d else "closed"
                except socket.timeout:
                    k = "held open"
                except OSError:
                    k = "reset"
                answers[k] = answers.get(k, 0) + 1
            print("cap: %d connections opened: %s" % (len(socks), answers))
            for s in socks:
                s.close()
        print("daemon RSS at the end %d KiB, %d fds" % (rss_kib(p.pid), fds(p.pid)))
    finally:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def _peek_closed(s):
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) in (b"",) or False
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


if __name__ == "__main__":
    main()
