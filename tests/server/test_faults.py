"""Fault injection (RNNTD_FAULT, see engine/shared/fault.h) and the systemd watchdog: each fault gives a clear
error to the requests it hits and the daemon keeps serving the rest, then exits 0 on SIGTERM.
  engine_nomem   a buffer allocation in the engine run fails     -> 503 out_of_memory + Retry-After
  engine_error   the backend reports a failed launch for a batch  -> 500 internal, next batch fine
  worker_hang    a worker hangs in its batch past worker_deadline_s -> 500 naming the key, the other
                 worker serves, WATCHDOG=1 pings stop (fake NOTIFY_SOCKET), workers_hung 1
  log_enospc     every log write fails with ENOSPC                -> requests unaffected, drops counted
  (real faults)  stderr a pipe nobody reads; the model files deleted, corrupted or truncated under a
                 SIGHUP reload -> the daemon neither blocks nor stops serving the loaded model."""
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (BACKEND, BIN, MODEL, PRECISION, SLOW, Daemon, NotifySocket, json_body, model_info,
                     random_features)

needs_model = unittest.skipUnless(MODEL and os.path.isdir(MODEL), "no test model (RNNTD_MODEL)")


def error_of(doc):
    return doc["error"]["code"], doc["error"]["message"]


class FaultTest(unittest.TestCase):
    def setUp(self):
        self.dim = model_info(MODEL)["feature_dim"]
        self.body = json_body(30, self.dim, random_features(30, self.dim, 11))
        self.daemons = []

    def start(self, config="", env=None, model=None, notify=None, **kw):
        """A daemon whose injected faults (env RNNTD_FAULT) are armed. The daemon arms them before
        /health/ready answers 200; this also waits for its notify message that they are (the message
        proves the daemon parsed them)."""
        if notify is None:
            notify = NotifySocket()
            self.addCleanup(notify.close)
        d = Daemon(MODEL if model is None else model, config, env=env, notify_socket=notify.path, **kw)
        self.daemons.append(d)
        if env and "RNNTD_FAULT" in env:
            notify.wait_for("STATUS=fault injection armed")
        return d

    def tearDown(self):
        for d in self.daemons:
            d.close()

    def finish(self, d):
        """SIGTERM: a clean exit (status 0, no sanitizer report)."""
        d.stop_clean()


@needs_model
class EngineFaults(FaultTest):
    def test_engine_nomem_fails_one_batch(self):
        d = self.start("batching:\n  workers: 1\n", env={"RNNTD_FAULT": "engine_nomem:1"})
        self.assertIn("fault injection on", d.log())
        st, hd, doc = d.transcribe(self.body)
        self.assertEqual(st, 503, doc)
        self.assertEqual(error_of(doc)[0], "out_of_memory")
        self.assertIn("injected fault engine_nomem", error_of(doc)[1])
        self.assertIn("retry-after", hd)
        st2, _, ok = d.transcribe(self.body)
        self.assertEqual(st2, 200, ok)
        st3, _, ok2 = d.transcribe(self.body)
        self.assertEqual((st3, ok2["text"]), (200, ok["text"]))
        m = d.settled_metrics()
        self.assertEqual(m["rnntd_decode_failures_total"], 1)
        self.finish(d)

    def test_engine_error_fails_one_batch_only(self):
        d = self.start("batching:\n  workers: 1\n", env={"RNNTD_FAULT": "engine_error:2"})
        res = [d.transcribe(self.body) for _ in range(4)]
        self.assertEqual([r[0] for r in res], [500, 500, 200, 200], [r[2] for r in res])
        for st, _, doc in res[:2]:
            code, msg = error_of(doc)
            self.assertEqual(code, "internal")
            self.assertIn("kernel launch failed (injected fault engine_error)", msg)
        self.assertEqual(res[2][2]["text"], res[3][2]["text"])
        self.assertIn('msg="batch failed"', d.log())
        self.finish(d)

    def test_bad_fault_spec_is_a_usage_error(self):
        r = subprocess.run([BIN, "--model", MODEL, "--port", "0", "--backend", BACKEND],
                           env=dict(os.environ, RNNTD_FAULT="engine_error:x"), capture_output=True, text=True,
                           timeout=30 * SLOW)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("RNNTD_FAULT", r.stderr)


@needs_model
class HungWorker(FaultTest):
    def test_hung_worker_is_given_up_and_watchdog_stops(self):
        notify = NotifySocket()
        self.addCleanup(notify.close)
        msgs = notify.msgs  # (monotonic time, text)
        d = self.start("batching:\n  workers: 2\n  worker_deadline_s: 1\n",
                       env={"RNNTD_FAULT": "worker_hang:1", "WATCHDOG_USEC": "400000"}, notify=notify)
        self.assertIn("msg=\"systemd watchdog\" interval_s=0.400", d.log())
        time.sleep(1.0)
        pings = [t for t, m in msgs if "WATCHDOG=1" in m.split("\n")]
        self.assertGreaterEqual(len(pings), 3, msgs)  # every 0.2 s while healthy
        hung = {}

        def hang():
            t0 = time.monotonic()
            hung["res"] = d.transcribe(self.body, timeout=30)
            hung["s"] = time.monotonic() - t0

        th = threading.Thread(target=hang)
        th.start()
        time.sleep(0.3)
        # The other worker keeps serving while the first one hangs.
        st, _, ok = d.transcribe(self.body, timeout=10)
        self.assertEqual(st, 200, ok)
        th.join(20 * SLOW)
        st, _, doc = hung["res"]
        self.assertEqual(st, 500, doc)
        self.assertIn("batching.worker_deadline_s", error_of(doc)[1])
        self.assertTrue(1.0 <= hung["s"] < 3.0 * SLOW, hung["s"])
        # Unhealthy: a STATUS line, then no more pings.
        end = time.monotonic() + 5 * SLOW
        while time.monotonic() < end and not any("STATUS=unhealthy" in m for _, m in msgs):
            time.sleep(0.05)
        t_unhealthy = next(t for t, m in msgs if "STATUS=unhealthy" in m)
        time.sleep(1.5)
        late = [t for t, m in msgs if "WATCHDOG=1" in m.split("\n") and t > t_unhealthy]
        self.assertEqual(late, [], "pings went on while a worker was hung")
        m = d.metrics()
        self.assertEqual(m["rnntd_workers_hung"], 1)
        self.assertEqual(m["rnntd_batches_abandoned_total"], 1)
        # Still serving on the healthy worker.
        st, _, ok2 = d.transcribe(self.body, timeout=10)
        self.assertEqual((st, ok2["text"]), (200, ok["text"]))
        self.finish(d)
        self.assertIn("worker stuck in a batch past batching.worker_deadline_s", d.log())

    def test_unit_asks_for_the_watchdog(self):
        unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "rnntd.service")
        with open(unit) as f:
            text = f.read()
        wd = re.search(r"(?m)^WatchdogSec=(\d+)s$", text)
        self.assertIsNotNone(wd, "no WatchdogSec= in rnntd.service")
        self.assertRegex(text, r"(?m)^Restart=on-failure$")  # a watchdog timeout counts as a failure
        self.assertRegex(text, r"(?m)^Type=notify$")

    def test_every_worker_hung_refuses_at_once(self):
        d = self.start("batching:\n  workers: 1\n  worker_deadline_s: 1\n", env={"RNNTD_FAULT": "worker_hang:1"})
        st, _, doc = d.transcribe(self.body, timeout=30)
        self.assertEqual(st, 500, doc)
        t0 = time.monotonic()
        st, hd, doc = d.transcribe(self.body, timeout=30)
        self.assertEqual(st, 503, doc)
        self.assertEqual(error_of(doc)[0], "unavailable")
        self.assertIn("retry-after", hd)
        self.assertLess(time.monotonic() - t0, 1.0 * SLOW)
        self.finish(d)


@needs_model
class LogFaults(FaultTest):
    def test_log_enospc(self):
        d = self.start("", env={"RNNTD_FAULT": "log_enospc:always"})
        n_before = len(d.log())
        for _ in range(20):
            st, _, doc = d.transcribe(self.body)
            self.assertEqual(st, 200, doc)
        m = d.settled_metrics()
        self.assertGreaterEqual(m["rnntd_log_lines_dropped_total"], 20)
        self.assertEqual(len(d.log()), n_before)  # nothing reached the file
        self.finish(d)

    def test_stderr_pipe_nobody_reads(self):
        # Before: log lines went out with a blocking write(2); once the pipe's 64 KiB filled, every
        # thread that logged (request lines: the HTTP threads) blocked and the daemon stopped answering.
        cmd = [BIN, "--listen", "127.0.0.1", "--port", "0", "--model", MODEL, "--backend", BACKEND]
        if PRECISION:
            cmd += ["--precision", PRECISION]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            port, got, end = None, b"", time.monotonic() + 30 * SLOW
            while port is None and time.monotonic() < end:
                r, _, _ = select.select([p.stderr], [], [], 0.2)
                if r:
                    got += os.read(p.stderr.fileno(), 65536)
                    mt = re.search(rb"msg=listening address=\S+ port=(\d+)", got)
                    port = int(mt.group(1)) if mt else None
            self.assertIsNotNone(port, got)
            d = Daemon.__new__(Daemon)
            d.port = port
            end = time.monotonic() + 30 * SLOW
            while time.monotonic() < end:
                try:
                    if d.request("GET", "/health/ready", timeout=2)[0] == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.05)
            # ~300 bytes of log a request: 400 requests are ~120 KB, twice the pipe's capacity.
            t0 = time.monotonic()
            for i in range(400):
                st, _, doc = d.request("GET", "/health/live", timeout=5)
                self.assertEqual(st, 200)
            st, _, doc = d.transcribe(self.body, timeout=10)
            self.assertEqual(st, 200, doc)
            self.assertLess(time.monotonic() - t0, 60 * SLOW)
            m = d.metrics()
            self.assertGreater(m["rnntd_log_lines_dropped_total"], 0)
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(30 * SLOW), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(10)
            p.stderr.close()


@needs_model
class ReloadFaults(FaultTest):
    def test_model_files_vanish_or_change_under_reload(self):
        tmp = tempfile.mkdtemp(prefix="rnntd-model-")
        self.addCleanup(shutil.rmtree, tmp, True)
        mdir = os.path.join(tmp, "model")
        shutil.copytree(MODEL, mdir)
        conf = 'model:\n  path: "%s"\n' % mdir
        d = self.start(conf, model=False)
        st, _, ref = d.transcribe(self.body)
        self.assertEqual(st, 200, ref)
        weights = os.path.join(mdir, "weights.safetensors")
        with open(weights, "rb") as f:
            original = f.read()

        def reload_fails(n):
            d.send_signal(signal.SIGHUP)
            end = time.monotonic() + 30 * SLOW
            while time.monotonic() < end and d.log().count("reload failed") < n:
                time.sleep(0.05)
            self.assertEqual(d.log().count("reload failed"), n, d.log()[-2000:])
            st, _, doc = d.transcribe(self.body)
            self.assertEqual((st, doc["text"], doc["tokens"]), (200, ref["text"], ref["tokens"]))

        os.remove(weights)                            # vanished
        reload_fails(1)
        with open(weights, "wb") as f:                # same size, garbage inside
            f.write(bytes((b * 7 + 3) & 0xFF for b in range(len(original))))
        reload_fails(2)
        with open(weights, "wb") as f:                # truncated mid-tensor
            f.write(original[:len(original) // 2])
        reload_fails(3)
        shutil.rmtree(mdir)                           # the whole directory gone
        reload_fails(4)
        m = d.metrics()
        self.assertEqual(m['rnntd_reloads_total{result="failed"}'], 4)
        self.assertEqual(m['rnntd_reloads_total{result="ok"}'], 0)
        # Restored: the next reload succeeds.
        shutil.copytree(MODEL, mdir)
        d.send_signal(signal.SIGHUP)
        end = time.monotonic() + 30 * SLOW
        while time.monotonic() < end and d.metrics()['rnntd_reloads_total{result="ok"}'] < 1:
            time.sleep(0.05)
        self.assertEqual(d.metrics()['rnntd_reloads_total{result="ok"}'], 1)
        st, _, doc = d.transcribe(self.body)
        self.assertEqual((st, doc["text"]), (200, ref["text"]))
        self.finish(d)


if __name__ == "__main__":
    unittest.main(verbosity=2)
