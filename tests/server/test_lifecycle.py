"""Start-up, configuration errors, flags, sd_notify, SIGTERM/SIGINT drain and SIGHUP reload."""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (BIN, CONF, MODEL, RELOAD_FROM, RELOAD_TO, SLOW, Daemon, cli_transcripts, json_body, model_info, npy_bytes,
                     random_features, split_response)


def run(args, timeout=30):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout * SLOW)


def needs_model(cls):
    return unittest.skipUnless(MODEL and os.path.isdir(MODEL), "no test model")(cls)


class ConfigAndFlags(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rnntd-cfg-")

    def write(self, name, text):
        p = os.path.join(self.tmp, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def test_config_errors_with_line_numbers(self):
        cases = [
            ("server:\n  port: 8080\nbatching:\n  max_batch: 0\n", ":4:14: batching.max_batch: 0 is out of range [1, 2048]"),
            ("server:\n  listen: 127.0.0.1\n  prot: 1\n", ":3:3: server.prot: unknown key"),
            ("model:\n  backend: tpu\n", ':2:12: model.backend: "tpu" is not one of auto | cpu | cuda'),
            ("limits:\n  max_frames: lots\n", ':2:15: limits.max_frames: expected an integer, got "lots"'),
            ("logging:\n  level: info\n", ":1:1: logging: unknown section"),
            ("server:\n  port: [1\n", ":3:1: "),
        ]
        for text, want in cases:
            with self.subTest(want=want):
                p = self.write("bad.yaml", text)
                r = run(["--check-config", "--config", p])
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("rnntd: " + p + want, r.stderr)
                # The daemon itself refuses to start with the same message, before listening.
                r = run(["--config", p, "--port", "0"])
                self.assertEqual(r.returncode, 2)
                self.assertIn(p + want, r.stderr)
                self.assertNotIn("listening", r.stderr)

    def test_shipped_config_and_flags(self):
        # --check-config loads the model too: the shipped config's path is the installed one.
        r = run(["--check-config", "--config", CONF, "--model", MODEL])
        self.assertEqual((r.returncode, r.stdout), (0, CONF + ": OK (model %s loads from " % model_info(MODEL)["name"] + MODEL + ")\n"), r.stderr)
        r = run(["--check-config", "--config", CONF, "--model", os.path.join(self.tmp, "nomodel")])
        self.assertEqual(r.returncode, 2)
        self.assertIn("rnntd: model.path '" + os.path.join(self.tmp, "nomodel") + "': ", r.stderr)
        bad = os.path.join(self.tmp, "badmodel")
        os.makedirs(bad)
        with open(os.path.join(bad, "model.yaml"), "w") as f:
            f.write("name: x\n")
        r = run(["--check-config", "--config", CONF, "--model", bad])
        self.assertEqual(r.returncode, 2)
        self.assertIn("rnntd: model.path '" + bad + "': ", r.stderr)
        r = run(["--print-config"])
        with open(CONF) as f:
            self.assertEqual(r.stdout, f.read())
        r = run(["--version"])
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^rnntd \d+\.\d+\.\d+\n$")
        r = run(["--help"])
        self.assertEqual(r.returncode, 0)
        self.assertIn("--config", r.stdout)
        r = run(["--bogus"])
        self.assertEqual(r.returncode, 2)
        r = run(["--port", "70000", "--check-config"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("rnntd: command line: server.port: 70000 is out of range [0, 65535]", r.stderr)
        r = run(["--config", os.path.join(self.tmp, "missing.yaml"), "--check-config"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.yaml: cannot open", r.stderr)
        # Flags override the file; --print-config shows the result.
        p = self.write("c.yaml", "server:\n  port: 1234\nmodel:\n  path: /a\n")
        r = run(["--config", p, "--port", "4321", "--model", "/b", "--listen", "::1", "--print-config"])
        self.assertIn("  port: 4321\n", r.stdout)
        self.assertIn('  path: "/b"\n', r.stdout)
        self.assertIn('  listen: "::1"\n', r.stdout)
        p = self.write("b.yaml", "model:\n  backend: cuda\n  precision: fp16\n")
        r = run(["--config", p, "--backend", "cpu", "--precision", "fp32", "--print-config"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("  backend: cpu\n", r.stdout)
        self.assertIn("  precision: fp32\n", r.stdout)
        r = run(["-b", "tpu", "--check-config"])
        self.assertEqual(r.returncode, 2)
        self.assertIn('model.backend: "tpu" is not one of auto | cpu | cuda', r.stderr)
        p = self.write("t.yaml", 'server:\n  auth_token_file: "%s/none"\n' % self.tmp)
        r = run(["--config", p, "--check-config"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot open the token file", r.stderr)

    def test_bad_model_exits_1(self):
        p = self.write("m.yaml", "")
        r = run(["--config", p, "--port", "0", "--model", os.path.join(self.tmp, "nomodel")])
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot load the model", r.stderr)

    @unittest.skipUnless(MODEL and os.path.isdir(MODEL), "no test model")
    def test_port_in_use_exits_1(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        try:
            r = run(["--port", str(port), "--model", MODEL])
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot listen", r.stderr)
        finally:
            s.close()


@needs_model
class Loading(unittest.TestCase):
    """While the model loads: live, not ready, transcriptions refused with 503 + Retry-After.
    The model's model.yaml is a FIFO, so loading waits until the test writes it."""

    def test_not_ready_while_loading(self):
        tmp = tempfile.mkdtemp(prefix="rnntd-loading-")
        mdir = os.path.join(tmp, "model")
        os.mkdir(mdir)
        for f in ("weights.safetensors", "tokens.txt"):
            os.symlink(os.path.join(os.path.abspath(MODEL), f), os.path.join(mdir, f))
        fifo = os.path.join(mdir, "model.yaml")
        os.mkfifo(fifo)
        with open(os.path.join(MODEL, "model.yaml"), "rb") as f:
            yaml_text = f.read()
        released = [False]

        def release():
            if not released[0]:
                released[0] = True
                fd = os.open(fifo, os.O_WRONLY)
                os.write(fd, yaml_text)
                os.close(fd)

        d = Daemon(mdir, wait_ready=False)
        try:
            d.wait_listening()
            self.assertEqual(d.request("GET", "/health/live")[0], 200)
            st, hd, body = d.request("GET", "/health/ready")
            self.assertEqual((st, json.loads(body)["error"]["code"]), (503, "not_ready"))
            self.assertIn("retry-after", hd)
            h = json.loads(d.request("GET", "/health")[2])
            self.assertEqual((h["status"], h["ready"], h["model"]), ("loading", False, None))
            st, hd, doc = d.transcribe(b'{"features": []}')
            self.assertEqual((st, doc["error"]["code"]), (503, "not_ready"))
            self.assertIn("retry-after", hd)
            self.assertEqual(d.metrics()["rnntd_ready"], 0)
            release()
            d.wait_ready()
            self.assertEqual(d.metrics()["rnntd_ready"], 1)
            st, _, doc = d.transcribe(b'{"features": []}')
            self.assertEqual((st, doc["error"]["code"]), (422, "empty_utterance"))  # past the ready gate
            self.assertEqual(d.stop(), 0)
        finally:
            try:
                if d.proc.poll() is None:
                    threading.Thread(target=release, daemon=True).start()
            finally:
                d.close()


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@needs_model
class Ipv6(unittest.TestCase):
    @unittest.skipUnless(ipv6_loopback(), "no IPv6 loopback")
    def test_listen_ipv6_loopback(self):
        # The harness passes --listen 127.0.0.1; a later --listen wins.
        d = Daemon(args=("--listen", "::1"), wait_ready=False)
        try:
            d.wait_listening()
            self.assertIn("msg=listening address=::1 ", d.log())
            import http.client
            end = time.monotonic() + 20 * SLOW
            while True:
                c = http.client.HTTPConnection("::1", d.port, timeout=10)
                try:
                    c.request("GET", "/health/ready")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    pass
                finally:
                    c.close()
                self.assertLess(time.monotonic(), end)
                time.sleep(0.02)
            self.assertEqual(d.stop(), 0)
        finally:
            d.close()


@needs_model
class Notify(unittest.TestCase):
    def test_notify_protocol(self):
        tmp = tempfile.mkdtemp(prefix="rnntd-notify-")
        path = os.path.join(tmp, "notify.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(0.2)
        msgs = []

        def wait_for(field, timeout=30):
            end = time.monotonic() + timeout * SLOW
            while time.monotonic() < end:
                try:
                    m = sock.recv(4096).decode()
                except socket.timeout:
                    continue
                msgs.append(m)
                if field in m.split("\n"):
                    return m
            self.fail("no %s in %s" % (field, msgs))

        d = Daemon(notify_socket=path, wait_ready=False)
        try:
            d.wait_listening()
            ready = wait_for("READY=1")
            # READY=1 comes only once the model is loaded and warmed up.
            self.assertEqual(d.request("GET", "/health/ready")[0], 200)
            self.assertIn("STATUS=ready: model %s" % model_info(MODEL)["name"], ready)
            self.assertTrue(any(m.startswith("STATUS=loading model") for m in msgs), msgs)
            d.send_signal(signal.SIGHUP)
            wait_for("RELOADING=1")
            wait_for("READY=1")
            d.send_signal(signal.SIGTERM)
            stopping = wait_for("STOPPING=1")
            self.assertIn("STATUS=draining", stopping)
            self.assertEqual(d.stop(), 0)
        finally:
            d.close()
            sock.close()


@needs_model
class Shutdown(unittest.TestCase):
    def setUp(self):
        self.info = model_info(MODEL)
        self.dim = self.info["feature_dim"]
        self.body = json_body(20, self.dim, random_features(20, self.dim, 4))

    def test_sigterm_answers_queued_and_uploading(self):
        # Jobs wait 5 s for a batch that never fills; a slow client is mid-upload at SIGTERM. One
        # worker: the 6 queued requests then run as one batch on any backend.
        d = Daemon(config="batching:\n  workers: 1\n  max_batch: 64\n  max_delay_us: 5000000\n  delay_when_idle: true\n")
        try:
            st, _, ref = d.transcribe(self.body, headers={"Connection": "close"}, timeout=30)
            self.assertEqual(st, 200)
            results = [None] * 6
            ts = [threading.Thread(target=lambda i=i: results.__setitem__(i, d.transcribe(self.body, timeout=30)))
                  for i in range(6)]
            for t in ts:
                t.start()
            end = time.monotonic() + 10 * SLOW
            while d.metrics()["rnntd_queue_depth"] < 6 and time.monotonic() < end:
                time.sleep(0.02)
            self.assertEqual(d.metrics()["rnntd_queue_depth"], 6)
            slow = socket.create_connection(("127.0.0.1", d.port), timeout=10 * SLOW)
            slow.sendall(b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(self.body) + self.body[:50])
            keep = d.conn()
            self.assertEqual(d.request("GET", "/health/live", conn=keep)[0], 200)
            time.sleep(0.2)
            t0 = time.monotonic()
            d.send_signal(signal.SIGTERM)
            for t in ts:
                t.join(30 * SLOW)
            # The queued requests ran at once (not after the 5 s delay), all answered correctly.
            self.assertLess(time.monotonic() - t0, 4.0)  # well below the 5 s batching delay
            for st, hd, doc in results:
                self.assertEqual(st, 200, doc)
                self.assertEqual(doc["tokens"], ref["tokens"])
                self.assertEqual(doc["batch_size"], 6)
            # While draining: not ready, new requests refused, new connections refused.
            st, hd, data = d.request("GET", "/health/ready", conn=keep)
            self.assertEqual(st, 503)
            self.assertEqual(json.loads(data)["error"]["code"], "shutting_down")
            keep.close()
            keep = d.conn()
            with self.assertRaises(OSError):
                keep.connect()
            # The slow upload was accepted before SIGTERM: it completes and is answered.
            self.assertIsNone(d.proc.poll())
            slow.sendall(self.body[50:])
            got = b""
            slow.settimeout(10 * SLOW)
            while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < 10:
                chunk = slow.recv(65536)
                if not chunk:
                    break
                got += chunk
            slow.close()
            st, hd, data = split_response(got)
            self.assertEqual(st, 200, data)
            self.assertEqual(d.stop(timeout=30), 0)
            log = d.log()
            self.assertTrue("msg=stopped" in log, log[-3000:])
            self.assertFalse("outcome=error" in log, log[-3000:])
        finally:
            d.close()

    def test_sigterm_under_load(self):
        d = Daemon(config="batching:\n  max_batch: 8\n  max_delay_us: 20000\n")
        try:
            st, _, ref = d.transcribe(self.body)
            stop = threading.Event()
            lock = threading.Lock()
            seen = {"ok": 0, "ok_after": 0, "503": 0, "conn_err": 0, "other": []}
            sent_sigterm = threading.Event()

            def client():
                while not stop.is_set():
                    try:
                        st, hd, doc = d.transcribe(self.body, headers={"Connection": "close"}, timeout=30)
                    except OSError:
                        with lock:
                            seen["conn_err"] += 1
                        if sent_sigterm.is_set():
                            return
                        continue
                    with lock:
                        if st == 200 and doc["tokens"] == ref["tokens"]:
                            seen["ok"] += 1
                            seen["ok_after"] += sent_sigterm.is_set()
                        elif st == 503 and doc["error"]["code"] == "shutting_down":
                            seen["503"] += 1
                        else:
                            seen["other"].append((st, doc))

            ts = [threading.Thread(target=client, daemon=True) for _ in range(8)]
            for t in ts:
                t.start()
            time.sleep(1.0 * SLOW)
            sent_sigterm.set()
            d.send_signal(signal.SIGTERM)
            rc = d.stop(timeout=30)
            stop.set()
            for t in ts:
                t.join(30 * SLOW)
            self.assertEqual(rc, 0)
            self.assertEqual(seen["other"], [])
            self.assertGreater(seen["ok"], 8)
            # Every request the daemon took in was answered, and clients got every 200 it sent.
            log = d.log()
            lines = [l for l in log.splitlines() if "msg=request" in l and "path=/v1/transcribe" in l]
            self.assertTrue(lines)
            for l in lines:
                self.assertTrue("outcome=ok" in l, l)
            logged_ok = sum(1 for l in lines if " status=200 " in l)
            self.assertEqual(logged_ok, seen["ok"] + 1)  # + the reference request
        finally:
            d.close()

    def test_drain_timeout_bounds_exit(self):
        d = Daemon(config="server:\n  drain_timeout_s: 1\n")
        try:
            slow = socket.create_connection(("127.0.0.1", d.port), timeout=10)
            slow.sendall(b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(self.body) + self.body[:10])
            time.sleep(0.2)
            t0 = time.monotonic()
            self.assertEqual(d.stop(sig=signal.SIGINT, timeout=20), 0)
            self.assertLess(time.monotonic() - t0, 8 * SLOW)
            self.assertTrue("drain timeout" in d.log(), d.log()[-3000:])
            slow.close()
        finally:
            d.close()


@needs_model
class Reload(unittest.TestCase):
    def test_sighup_swaps_model_without_dropping(self):
        if not (os.path.isdir(RELOAD_FROM) and os.path.isdir(RELOAD_TO)):
            self.skipTest("no models to reload between (RNNTD_RELOAD_FROM, RNNTD_RELOAD_TO)")
        M1, M2 = RELOAD_FROM, RELOAD_TO
        i1, i2 = model_info(M1), model_info(M2)
        self.assertEqual(i1["feature_dim"], i2["feature_dim"])
        self.assertNotEqual(i1["name"], i2["name"])
        dim = i1["feature_dim"]
        tmp = tempfile.mkdtemp(prefix="rnntd-reload-")
        path = os.path.join(tmp, "in.npy")
        vals = random_features(60, dim, 9)
        with open(path, "wb") as f:
            f.write(npy_bytes(60, dim, vals))
        with open(path, "rb") as f:
            body = f.read()
        ref1 = cli_transcripts(M1, [path])[path]
        ref2 = cli_transcripts(M2, [path])[path]
        conf1 = 'model:\n  path: "%s"\nbatching:\n  max_delay_us: 1000\n' % M1
        d = Daemon(model=False, config=conf1)
        try:
            stop = threading.Event()
            bad = []
            count = [0, 0]

            def client():
                c = d.conn(timeout=30)
                while not stop.is_set():
                    st, _, doc = d.transcribe(body, "application/x-npy", conn=c)
                    if st != 200:
                        bad.append((st, doc))
                        continue
                    if doc["model"] == i1["name"] and doc["tokens"] == ref1["tokens"]:
                        count[0] += 1
                    elif doc["model"] == i2["name"] and doc["tokens"] == ref2["tokens"]:
                        count[1] += 1
                    else:
                        bad.append((st, doc))
                c.close()

            ts = [threading.Thread(target=client, daemon=True) for _ in range(4)]
            for t in ts:
                t.start()
            time.sleep(0.3 * SLOW)
            d.write_config('model:\n  path: "%s"\nbatching:\n  max_batch: 4\n  max_delay_us: 1000\n'
                           'log:\n  level: debug\nserver:\n  max_connections: 100\n' % M2)
            d.send_signal(signal.SIGHUP)
            end = time.monotonic() + 20 * SLOW
            while time.monotonic() < end:
                h = json.loads(d.request("GET", "/health")[2])
                if h["model"]["name"] == i2["name"]:
                    break
                time.sleep(0.05)
            time.sleep(0.3 * SLOW)
            stop.set()
            for t in ts:
                t.join(30 * SLOW)
            self.assertEqual(bad, [])
            self.assertGreater(count[0], 0)
            self.assertGreater(count[1], 0)
            h = json.loads(d.request("GET", "/health")[2])
            self.assertEqual((h["model"]["name"], h["max_batch"]), (i2["name"], 4))
            log = d.log()
            self.assertTrue("first=server.max_connections" in log, "no restart-only warning")  # kept, and said so
            self.assertTrue("msg=reloaded" in log, "no reload line")
            # A broken config: the daemon keeps serving what it had.
            d.write_config("batching:\n  max_batch: -3\n")
            d.send_signal(signal.SIGHUP)
            end = time.monotonic() + 10 * SLOW
            while d.metrics()['rnntd_reloads_total{result="failed"}'] < 1 and time.monotonic() < end:
                time.sleep(0.05)
            m = d.metrics()
            self.assertEqual((m['rnntd_reloads_total{result="ok"}'], m['rnntd_reloads_total{result="failed"}']), (1, 1))
            self.assertRegex(d.log(), r"reload failed.*rnntd\.yaml:2:14: batching\.max_batch: -3 is out of range")
            st, _, doc = d.transcribe(body, "application/x-npy")
            self.assertEqual((st, doc["model"], doc["tokens"]), (200, i2["name"], ref2["tokens"]))
            self.assertEqual(d.stop(), 0)
        finally:
            d.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
