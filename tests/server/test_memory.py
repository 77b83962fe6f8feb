"""Memory after large request bodies (issue 11, defect 5): rounds of 16 concurrent ~12 MB JSON bodies
(6,000 frames x 80 features, 17 significant digits each) against the shipped model; once the daemon
is idle its resident set (VmRSS of /proc/PID/status) must come back near where it started. Before
the streaming JSON parser, the allocator settings (server/main.c memory_tune) and the CPU workspace
beyond 16 MB given back when a worker goes idle (rnnt_runner_trim) it went from 30 to 426 MB; now 25 -> 28
(23 -> 23 with the mmap threshold at 1 MB, session 5; at 4 MB it was 23 -> 30-43, once over the bound). Skipped under the sanitizers (their allocator keeps freed memory in quarantine on purpose)."""
import os
import random
import sys
import threading
import time
import unittest

from harness import CONF, SLOW, Daemon, npy_bytes

SHIPPED = os.environ.get("RNNTD_SHIPPED_MODEL", "")
FRAMES, DIM, CLIENTS, ROUNDS = 6000, 80, 16, 3
# What may stay after the JSON rounds over the baseline taken after the same batches sent as .npy
# (which already holds each worker's engine workspace, sized by the largest batch it ran: engine/
# backend_cpu.c keeps it): the allocator's per-thread caches and arenas (4 at most).
ALLOWED_GROWTH_MB = 32


def vm_rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


def big_body(seed):
    r = random.Random(seed)
    rows = []
    for _ in range(FRAMES):
        rows.append("[" + ",".join("%.16e" % r.gauss(-4.0, 2.5) for _ in range(DIM)) + "]")
    return ('{"features": [' + ",".join(rows) + "]}").encode()


@unittest.skipUnless(SHIPPED and os.path.isdir(SHIPPED), "no shipped model (RNNTD_SHIPPED_MODEL)")
@unittest.skipIf(SLOW > 1, "RSS means nothing under a sanitizer's allocator")
class LargeBodies(unittest.TestCase):
    def test_rss_returns_near_baseline(self):
        with open(CONF) as f:
            conf = f.read()
        # The shipped configuration, but no shedding by expected wait: every request must be decoded.
        conf = conf.replace("max_queue_wait_ms: 1000", "max_queue_wait_ms: 0")
        d = Daemon(SHIPPED, conf)
        try:
            body = big_body(1)
            small = ('{"features": [' + ",".join(["[" + ",".join(["-4.0"] * DIM) + "]"] * 50) + "]}").encode()
            for _ in range(3):
                st, _, doc = d.transcribe(small)
                self.assertEqual(st, 200, doc)
            time.sleep(3)
            start = vm_rss_mb(d.proc.pid)
            # The same batches as .npy first: every worker's engine workspace grows to this batch shape.
            npy = npy_bytes(FRAMES, DIM, [-4.0] * (FRAMES * DIM))
            for _ in range(2):
                res = [None] * CLIENTS

                def one_npy(i):
                    res[i] = d.transcribe(npy, "application/x-npy", timeout=300)

                ts = [threading.Thread(target=one_npy, args=(i,)) for i in range(CLIENTS)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(300 * SLOW)
                self.assertEqual([r[0] for r in res], [200] * CLIENTS)
            d.settled_metrics()
            time.sleep(3)
            base = vm_rss_mb(d.proc.pid)
            peak = base
            stop = threading.Event()

            def sampler():
                nonlocal peak
                while not stop.is_set():
                    peak = max(peak, vm_rss_mb(d.proc.pid))
                    time.sleep(0.05)

            th = threading.Thread(target=sampler, daemon=True)
            th.start()
            after = []
            for rnd in range(ROUNDS):
                res = [None] * CLIENTS

                def one(i):
                    res[i] = d.transcribe(body, timeout=300)

                ts = [threading.Thread(target=one, args=(i,)) for i in range(CLIENTS)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(300 * SLOW)
                self.assertEqual([r[0] for r in res], [200] * CLIENTS, [r[2] for r in res if r[0] != 200][:1])
                d.settled_metrics()
                time.sleep(3)  # the daemon trims its heap after 2 s idle
                after.append(vm_rss_mb(d.proc.pid))
            stop.set()
            th.join(5)
            print("\n  body %.1f MB; VmRSS idle at start %.1f MB, after the .npy rounds (engine workspace) %.1f MB, "
                  "peak %.1f MB, after each JSON round %s MB" %
                  (len(body) / 1e6, start, base, peak, ", ".join("%.1f" % a for a in after)), file=sys.stderr)
            for a in after:
                self.assertLess(a - base, ALLOWED_GROWTH_MB, "RSS %.1f MB after a round, baseline %.1f MB" % (a, base))
                # and near where it started: each worker keeps at most a 16 MB engine workspace
                self.assertLess(a - start, ALLOWED_GROWTH_MB, "RSS %.1f MB after a round, %.1f MB at start" % (a, start))
            self.assertEqual(d.stop(), 0)
        finally:
            d.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
