"""Overload at the shipped defaults (issue 11, defect 4): 320 clients, more than the workers can drain,
each sending 10 s utterances back to back on fresh connections (honouring Retry-After) to the daemon
started with conf/rnntd.yaml and the shipped model. Some requests must be refused at once with 503
queue_full and a Retry-After taken from the queue's drain rate, the accepted ones must wait no longer
than batching.max_queue_wait_ms allows (p99 bounded), and every request must get an answer. Before
(max_queue 256 = max_connections 256) nothing was refused and the p99 grew with the client count."""
import http.client
import json
import os
import sys
import threading
import time
import unittest

from harness import CONF, SLOW, Daemon, npy_bytes, random_features

SHIPPED = os.environ.get("RNNTD_SHIPPED_MODEL", "")
CLIENTS = int(os.environ.get("RNNTD_OVERLOAD_CLIENTS", "320"))
SECONDS = float(os.environ.get("RNNTD_OVERLOAD_SECONDS", "15"))
FRAMES, DIM = 1000, 80


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))] if xs else float("nan")


@unittest.skipUnless(SHIPPED and os.path.isdir(SHIPPED), "no shipped model (RNNTD_SHIPPED_MODEL)")
class OverloadAtDefaults(unittest.TestCase):
    def test_sheds_with_retry_after_and_bounded_wait(self):
        with open(CONF) as f:
            conf = f.read()
        d = Daemon(SHIPPED, conf)
        try:
            body = npy_bytes(FRAMES, DIM, random_features(FRAMES, DIM, 3))
            # Warm: a few batches give the scheduler its drain rate.
            for _ in range(4):
                st, _, doc = d.transcribe(body, "application/x-npy", timeout=60)
                self.assertEqual(st, 200, doc)
            results, errors = [], []
            lock = threading.Lock()
            barrier = threading.Barrier(CLIENTS)
            end_at = [0.0]

            def client(i):
                barrier.wait(60)
                while time.monotonic() < end_at[0]:
                    t0 = time.monotonic()
                    try:
                        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=120 * SLOW)
                        c.request("POST", "/v1/transcribe", body, {"Content-Type": "application/x-npy",
                                                                    "Connection": "close"})
                        r = c.getresponse()
                        data = r.read()
                        ra = r.getheader("Retry-After")
                        queued = json.loads(data)["timings"]["queue_ms"] / 1e3 if r.status == 200 else None
                        c.close()
                    except Exception as e:  # noqa: BLE001 - every one is a lost request
                        with lock:
                            errors.append(repr(e))
                        continue
                    dt = time.monotonic() - t0
                    with lock:
                        results.append((r.status, dt, ra, queued))
                    if r.status == 503:
                        time.sleep(min(float(ra or 1), 5.0))

            end_at[0] = time.monotonic() + 60 + SECONDS  # reset below once all are started
            ts = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
            for t in ts:
                t.start()
            end_at[0] = time.monotonic() + SECONDS
            for t in ts:
                t.join(SECONDS + 300 * SLOW)
            self.assertFalse(any(t.is_alive() for t in ts), "a client never got its answer")
            self.assertEqual(errors, [], "lost requests")
            ok = [dt for st, dt, _, _ in results if st == 200]
            queued = [q for st, _, _, q in results if st == 200]
            shed = [(dt, ra) for st, dt, ra, _ in results if st == 503]
            other = [st for st, _, _, _ in results if st not in (200, 503)]
            m = d.settled_metrics(timeout=60)
            print("\n  %d clients, %.0f s: %d answered 200 (p50 %.2f s, p99 %.2f s, max %.2f s; queued p50 %.2f s, "
                  "p99 %.2f s), %d answered 503 (p99 %.3f s, Retry-After %s), other %s; server drain rate %.0f frames/s" %
                  (CLIENTS, SECONDS, len(ok), pct(ok, 50), pct(ok, 99), max(ok) if ok else 0, pct(queued, 50),
                   pct(queued, 99), len(shed),
                   pct([s[0] for s in shed], 99), sorted({s[1] for s in shed}), other,
                   m.get("rnntd_queue_drain_frames_per_second", 0)), file=sys.stderr)
            self.assertEqual(other, [])
            self.assertGreater(len(ok), 0)
            self.assertGreater(len(shed), 0, "overload was not shed")
            for dt, ra in shed:
                self.assertTrue(ra is not None and 1 <= int(ra) <= 30, ra)
            # Refused without queueing: the time is the client's own upload of 320 KB (320 Python threads on a
            # small machine), well under what an accepted request takes.
            self.assertLess(pct([s[0] for s in shed], 50), pct(ok, 50))
            self.assertLess(pct([s[0] for s in shed], 99), 2.0 * SLOW, "503s were not immediate")
            # Accepted: queued about max_queue_wait_ms (1 s; the wait is an estimate from the drain rate,
            # which other load on the machine moves), then their batch's compute (16 x 10 s on one core).
            # Measured: queued p99 0.7-1.1 s, total p99 2.1-2.8 s; before the bound: p50 17.9 s, p99 21.2 s.
            self.assertLess(pct(queued, 99), 4.0 * SLOW)
            self.assertLess(pct(ok, 99), 10.0 * SLOW)
            # Nothing lost: the server counted what the clients saw.
            self.assertEqual(m['rnntd_requests_total{endpoint="transcribe",code="200"}'], len(ok) + 4)
            self.assertEqual(m['rnntd_requests_total{endpoint="transcribe",code="503"}'], len(shed))
            self.assertEqual(m['rnntd_rejected_total{reason="queue_full"}'], len(shed))
            self.assertEqual(d.stop(), 0)
        finally:
            d.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
