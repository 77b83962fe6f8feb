"""Dynamic batching through HTTP: many concurrent clients all get correct answers, batches really
form (visible in /metrics), a transcript is the same alone or in a batch, and overload is refused
at once with 503 + Retry-After."""
import json
import os
import sys
import tempfile
import threading
import time
import unittest

from harness import (BACKEND, MODEL, SLOW, Daemon, DaemonTest, cli_transcripts, json_body, npy_bytes, random_features,
                     read_npy, readb, sample_files)
from test_api import make_inputs


def run_threads(n, fn, timeout):
    """Runs fn(i) on n threads started together; returns their results (exceptions re-raised)."""
    results, errors = [None] * n, []
    barrier = threading.Barrier(n)

    def body(i):
        try:
            barrier.wait(timeout)
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
        if t.is_alive():
            raise AssertionError("a client thread did not finish in %ss" % timeout)
    if errors:
        raise errors[0]
    return results


class Batching(DaemonTest):
    # Batches of up to 8, formed within 30 ms: concurrent clients share batches.
    config = "batching:\n  max_batch: 8\n  max_delay_us: 30000\n  max_queue: 64\n  delay_when_idle: true\n"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="rnntd-batch-")
        cls.inputs = make_inputs(cls.dim, cls.tmp, lengths=(3, 17, 29, 64, 100, 101, 180, 257, 400, 512), seed=7)
        cls.ref = cli_transcripts(MODEL, [p for p, _, _ in cls.inputs])
        cls.bodies = [readb(p) for p, _, _ in cls.inputs]

    def test_1_alone_vs_batched(self):
        # Alone: one request at a time (no one to batch with).
        alone = []
        for (_, rows, _), body in zip(self.inputs, self.bodies):
            st, _, doc = self.d.transcribe(body, "application/x-npy")
            self.assertEqual(st, 200, doc)
            self.assertEqual(doc["batch_size"], 1 if rows else 0)  # zero frames skip the engine
            alone.append(doc)
        before = self.d.settled_metrics()
        # Batched: all at once, several rounds.
        n = len(self.bodies)
        for rnd in range(3):
            docs = run_threads(n, lambda i: self.d.transcribe(self.bodies[i], "application/x-npy"), 60 * SLOW)
            sizes = []
            for i, (st, _, doc) in enumerate(docs):
                self.assertEqual(st, 200, doc)
                self.assertEqual(doc["text"], alone[i]["text"])
                self.assertEqual(doc["tokens"], alone[i]["tokens"])  # ids, tokens, frames and times
                self.assertEqual(doc["text"], self.ref[self.inputs[i][0]]["text"])
                sizes.append(doc["batch_size"])
            self.assertGreater(max(sizes), 1, "no batch formed in round %d: %s" % (rnd, sizes))
        after = self.d.settled_metrics()
        batches = after["rnntd_batches_total"] - before["rnntd_batches_total"]
        items = after["rnntd_batch_utterances_total"] - before["rnntd_batch_utterances_total"]
        self.assertEqual(items, 3 * sum(1 for _, rows, _ in self.inputs if rows))
        self.assertLess(batches, items)  # mean batch size above 1
        self.assertGreater(after["rnntd_padding_frames_total"], 0)  # different lengths shared batches
        self.assertLess(after['rnntd_batch_size_bucket{le="1"}'], after["rnntd_batch_size_count"])

    def test_2_many_clients(self):
        # 16 clients x 8 requests each on keep-alive connections, JSON and npy mixed.
        n_clients, per = 16, 8

        def client(c):
            conn = self.d.conn(timeout=60)
            out = []
            try:
                for k in range(per):
                    i = (c * 7 + k * 3) % len(self.inputs)
                    path, rows, vals = self.inputs[i]
                    if (c + k) % 2:
                        st, _, doc = self.d.transcribe(self.bodies[i], "application/x-npy", conn=conn)
                    else:
                        st, _, doc = self.d.transcribe(json_body(rows, self.dim, vals), conn=conn)
                    out.append((i, st, doc))
            finally:
                conn.close()
            return out

        before = self.d.settled_metrics()
        t0 = time.monotonic()
        results = run_threads(n_clients, client, 120 * SLOW)
        elapsed = time.monotonic() - t0
        sizes = []
        for out in results:
            self.assertEqual(len(out), per)
            for i, st, doc in out:
                self.assertEqual(st, 200, doc)
                ref = self.ref[self.inputs[i][0]]
                self.assertEqual(doc["text"], ref["text"])
                self.assertEqual([t["id"] for t in doc["tokens"]], [t["id"] for t in ref["tokens"]])
                self.assertEqual([t["frame"] for t in doc["tokens"]], [t["frame"] for t in ref["tokens"]])
                sizes.append(doc["batch_size"])
        after = self.d.settled_metrics()
        ok = after['rnntd_requests_total{endpoint="transcribe",code="200"}'] - \
            before['rnntd_requests_total{endpoint="transcribe",code="200"}']
        self.assertEqual(ok, n_clients * per)
        batches = after["rnntd_batches_total"] - before["rnntd_batches_total"]
        self.assertLess(batches, n_clients * per / 2, "mean batch below 2: sizes %s" % sizes)
        self.assertLessEqual(max(sizes), 8)
        self.assertEqual(after["rnntd_requests_in_flight"], 0)  # /metrics does not count itself (issue 11)
        self.assertEqual(after["rnntd_pending_bytes"], 0)
        print("\n  %d requests from %d clients in %.2fs, mean batch %.2f" %
              (n_clients * per, n_clients, elapsed, sum(sizes) / len(sizes)), file=sys.stderr)
        h = json.loads(self.d.request("GET", "/health")[2])
        self.assertGreater(h["mean_batch_size"], 1)
        self.assertGreater(h["audio_seconds"], 0)
        self.assertGreater(h["real_time_factor"], 0)


class Spread(DaemonTest):
    # 8 requests wait together for a batch of 64 that never fills; 2 workers are idle when the delay
    # is up. The CPU backend shares them out (two batches of 4 at once); CUDA takes one batch of 8.
    config = "batching:\n  workers: 2\n  max_batch: 64\n  max_delay_us: 1000000\n  max_queue: 64\n  delay_when_idle: true\n"

    def test_shared_among_idle_workers(self):
        body = json_body(200, self.dim, random_features(200, self.dim, 5))
        res = run_threads(8, lambda i: self.d.transcribe(body, timeout=30), 60 * SLOW)
        self.assertEqual([r[0] for r in res], [200] * 8)
        sizes = [doc["batch_size"] for _, _, doc in res]
        if BACKEND == "cpu":
            # the first batch takes ceil(8 / 2 idle workers) = 4; the rest is shared again among the
            # workers idle at that moment (a worker done with its 4 may take part of it), so never more
            self.assertEqual(max(sizes), 4, sizes)
        else:
            self.assertEqual(sizes, [8] * 8)
        self.assertEqual(len({json.dumps(doc["tokens"]) for _, _, doc in res}), 1)  # same input, same answer


class Overload(DaemonTest):
    # Jobs wait up to 3 s for a batch of 64 that never fills; only 4 may wait; one worker, so the 4 run
    # as one batch whatever the backend (the CPU shares a batch out among idle workers: class Spread).
    config = "batching:\n  workers: 1\n  max_batch: 64\n  max_delay_us: 3000000\n  max_queue: 4\n  delay_when_idle: true\n"

    def test_queue_full_503(self):
        body = json_body(5, self.dim, random_features(5, self.dim, 3))

        def one(i):
            t0 = time.monotonic()
            st, hd, doc = self.d.transcribe(body, timeout=30)
            return st, hd, doc, time.monotonic() - t0

        res = run_threads(10, one, 60 * SLOW)
        ok = [r for r in res if r[0] == 200]
        busy = [r for r in res if r[0] == 503]
        self.assertEqual((len(ok), len(busy)), (4, 6), [r[0] for r in res])
        for st, hd, doc, dt in busy:
            self.assertError(st, hd, doc, 503, "queue_full")
            self.assertEqual(hd["retry-after"], "1")
            self.assertLess(dt, 2.0)  # refused at once, not after the 3 s the queued ones wait
        for st, hd, doc, dt in ok:
            self.assertEqual(doc["batch_size"], 4)
            self.assertGreater(dt, 2.5)
        m = self.d.settled_metrics()
        self.assertEqual(m['rnntd_rejected_total{reason="queue_full"}'], 6)
        self.assertEqual(m['rnntd_requests_total{endpoint="transcribe",code="503"}'], 6)


class MemoryBudget(DaemonTest):
    # At most 1 MiB of bodies and features in memory; queued requests hold theirs for 3 s.
    config = ("batching:\n  max_batch: 64\n  max_delay_us: 3000000\n"
              "limits:\n  max_pending_bytes: 1048576\n  max_body_bytes: 1048576\n  max_frames: 200000\n")

    def test_pending_bytes_503(self):
        rows = 300 * 1024 // (4 * self.dim)  # ~300 KiB of float32
        body = npy_bytes(rows, self.dim, random_features(rows, self.dim, 5))

        def one(i):
            return self.d.transcribe(body, "application/x-npy", timeout=30)

        res = run_threads(5, one, 60 * SLOW)
        codes = sorted(r[0] for r in res)
        self.assertIn(200, codes)
        self.assertIn(503, codes)
        for st, hd, doc in res:
            if st == 503:
                self.assertError(st, hd, doc, 503, "overloaded")
        m = self.d.settled_metrics()
        self.assertGreater(m['rnntd_rejected_total{reason="memory"}'], 0)
        self.assertEqual(m["rnntd_pending_bytes"], 0)


class LoadGen(DaemonTest):
    """tests/bench/loadgen.py runs against the daemon and reports consistent figures."""
    config = "batching:\n  max_batch: 8\n  max_delay_us: 5000\n"

    def test_loadgen(self):
        import subprocess
        tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "loadgen.py")
        r = subprocess.run([sys.executable, tool, "--url", "http://127.0.0.1:%d" % self.d.port, "--concurrency", "6",
                            "--requests", "60", "--warmup", "0.2", "--frames", "40", "--json"],
                           capture_output=True, text=True, timeout=120 * SLOW)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rep = json.loads(r.stdout)
        self.assertEqual(rep["requests_ok"], 60)
        self.assertEqual(rep["statuses"], {"200": 60})
        self.assertGreater(rep["requests_per_s"], 0)
        self.assertGreater(rep["audio_s_per_s"], 0)
        L = rep["latency_ms"]
        self.assertTrue(0 < L["p50"] <= L["p90"] <= L["p99"] <= L["max"])
        self.assertGreaterEqual(rep["server"]["batches"], 1)

    def test_loadgen_c(self):
        """--client c: the same requests from tests/bench/loadc.c (built beside the daemon)."""
        import subprocess
        tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "loadgen.py")
        loadc = os.path.join(os.environ["RNNTD_BUILD_DIR"], "tests", "bench", "loadc")
        r = subprocess.run([sys.executable, tool, "--url", "http://127.0.0.1:%d" % self.d.port, "--concurrency", "6",
                            "--duration", "1.5", "--warmup", "0.3", "--frames", "40", "--utterances", "5",
                            "--client", "c", "--loadc", loadc, "--json"],
                           capture_output=True, text=True, timeout=120 * SLOW)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rep = json.loads(r.stdout)
        self.assertGreater(rep["requests_ok"], 6)
        self.assertEqual(rep["statuses"], {"200": rep["requests_ok"]})
        self.assertEqual(rep["connection_errors"], 0)
        # 5 utterances of 20, 30, ..., 60 frames (10 ms each), sent round robin: the mean lies in between
        self.assertTrue(0.2 <= rep["mean_audio_s"] <= 0.6, rep["mean_audio_s"])
        self.assertTrue(1 <= rep["mean_batch_size"] <= 8, rep["mean_batch_size"])
        L = rep["latency_ms"]
        self.assertTrue(0 < L["p50"] <= L["p90"] <= L["p99"] <= L["max"])
        self.assertGreater(rep["server_timings_ms_p50"]["total_ms"], 0)
        self.assertGreater(rep["client_cpu_ms_per_request"], 0)
        self.assertGreaterEqual(rep["server"]["batches"], 1)
        # a bad program path is a usage error, not a crash
        bad = subprocess.run([sys.executable, tool, "--url", "http://127.0.0.1:%d" % self.d.port, "--duration", "0.2",
                              "--client", "c", "--loadc", "/nonexistent/loadc", "--json"],
                             capture_output=True, text=True, timeout=60 * SLOW)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("needs the loadc program", bad.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
