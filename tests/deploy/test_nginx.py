"""nginx in front of three rnntd daemons (deploy/nginx/run-cluster.sh), on 127.0.0.1 only.

- Faults under load: one daemon gets SIGTERM (it drains), another SIGKILL. Every request must end in a
  200 with the right transcript or a clean, retryable error (502/503/504 with a JSON error body and
  Retry-After); none may hang (each request has a client timeout). Counts and throughput are printed.
- Rolling restart under load (SIGTERM, wait for the exit, start again on the same port, one daemon at a
  time): loses nothing. "Nothing lost" means here: every request is answered 200 with the right
  transcript on the client's FIRST try. The client's single retry on 502/503/504 is counted and must
  stay unused: nginx's proxy_next_upstream (with non_idempotent, as a transcription has no side
  effect) absorbs the refused connections and the draining daemons' 503s itself. The retries nginx
  made are counted from its access log ($upstream_status lists every try).
- The request id: the client's X-Request-Id reaches the daemon (its answer's "id"); without one nginx
  makes one and the answer, the response header and nginx's log carry the same.
- nginx's own errors are JSON (413 above limits.max_body_bytes); the WebSocket block passes the
  upgrade handshake to the upstream and relays bytes both ways (a stand-in upstream, as rnntd has no
  /v1/stream yet).

Environment: RNNTD_BIN (the daemon), RNNTD_TEST_MODEL (default models/en-char-small, whose samples/
are the load), RNNTD_NGINX (default: nginx on PATH or /usr/sbin/nginx).
"""
import base64
import glob
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(SRC, "deploy", "nginx", "run-cluster.sh")
BIN = os.environ.get("RNNTD_BIN", os.path.join(SRC, "build", "server", "rnntd"))
MODEL = os.environ.get("RNNTD_TEST_MODEL", os.path.join(SRC, "models", "en-char-small"))
NGINX = os.environ.get("RNNTD_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
CLIENT_TIMEOUT_S = 10.0
FAIL_TIMEOUT_S = 1
RETRYABLE = (502, 503, 504)


def read(p):
    with open(p, "rb") as f:
        return f.read()


class Cluster:
    """deploy/nginx/run-cluster.sh --detach N, its state directory and its processes."""

    def __init__(self, n):
        self.dir = tempfile.mkdtemp(prefix="rnntd-nginx-test-")
        self.env = dict(os.environ, RNNTD_BIN=BIN, RNNTD_MODEL=MODEL, RNNTD_NGINX=NGINX,
                        RNNTD_FAIL_TIMEOUT_S=str(FAIL_TIMEOUT_S), RNNTD_ARGS="--backend cpu")
        self.n = n
        try:
            r = self.run("--detach", str(n), timeout=60)
            if r.returncode != 0:
                raise RuntimeError("run-cluster.sh failed:\n" + r.stdout + r.stderr)
            self.port = int(read(os.path.join(self.dir, "nginx.port")))
        except BaseException:
            self.close()  # whatever it had started (a timeout included) ends here
            raise

    def run(self, *args, timeout=60):
        return subprocess.run([SCRIPT, "--dir", self.dir] + list(args), env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def pid(self, i):
        return int(read(os.path.join(self.dir, "rnntd-%d" % i, "pid")))

    def daemon_port(self, i):
        return int(read(os.path.join(self.dir, "rnntd-%d" % i, "port")))

    def daemon_log(self, i):
        return read(os.path.join(self.dir, "rnntd-%d" % i, "stderr.log")).decode("utf-8", "replace")

    def access_log(self):
        p = os.path.join(self.dir, "access.log")
        return read(p).decode() if os.path.exists(p) else ""

    def alive(self, pid):
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False

    def wait_gone(self, pid, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.alive(pid):
                return True
            time.sleep(0.02)
        return False

    def close(self):
        try:
            self.run("stop", timeout=90)
        finally:
            # Whatever survived the script's stop (it should be nothing) is ours to end: a daemon whose
            # stderr is its log here, the nginx whose command line names this directory.
            for p in glob.glob(os.path.join(self.dir, "rnntd-*", "pid")) + [os.path.join(self.dir, "nginx.pid")]:
                try:
                    pid = int(read(p))
                    if p.endswith("nginx.pid"):
                        ours = ("-p\0%s\0" % os.path.realpath(self.dir)).encode() in read("/proc/%d/cmdline" % pid)
                    else:
                        ours = os.readlink("/proc/%d/fd/2" % pid) == os.path.realpath(
                            os.path.join(os.path.dirname(p), "stderr.log"))
                    if ours:
                        os.kill(pid, signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            shutil.rmtree(self.dir, ignore_errors=True)


class Load:
    """C client threads posting the samples to nginx in a loop until stopped; one retry on 502/503/504."""

    def __init__(self, port, bodies, expected, clients):
        self.port, self.bodies, self.expected = port, bodies, expected
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.c = {"requests": 0, "ok_first_try": 0, "ok_after_retry": 0, "clean_5xx_first_try": 0,
                  "clean_5xx_final": 0, "bad": 0, "hangs": 0, "wrong_text": 0}
        self.problems = []
        self.threads = [threading.Thread(target=self.client, args=(k,), daemon=True) for k in range(clients)]

    def start(self):
        self.t0 = time.monotonic()
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(CLIENT_TIMEOUT_S * 2 + 5)
        self.elapsed = time.monotonic() - self.t0
        return self

    def note(self, key, problem=None):
        with self.lock:
            self.c[key] += 1
            if problem and len(self.problems) < 20:
                self.problems.append(problem)

    def attempt(self, conn, name):
        """(status, headers, body) or raises socket.timeout / OSError / http.client errors."""
        conn.request("POST", "/v1/transcribe", body=self.bodies[name],
                     headers={"Content-Type": "application/x-npy"})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()

    def clean_error(self, st, hd, body):
        if st not in RETRYABLE or "retry-after" not in hd:
            return False
        try:
            doc = json.loads(body)
        except ValueError:
            return False
        return set(doc) == {"error"} and set(doc["error"]) == {"code", "message"}

    def client(self, k):
        names = sorted(self.bodies)
        i = k
        conn = None
        while not self.stop_flag.is_set():
            name = names[i % len(names)]
            i += 1
            with self.lock:
                self.c["requests"] += 1
            for try_no in (1, 2):
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CLIENT_TIMEOUT_S)
                try:
                    st, hd, body = self.attempt(conn, name)
                except socket.timeout:
                    self.note("hangs", "%s: no answer in %.0f s" % (name, CLIENT_TIMEOUT_S))
                    conn.close()
                    conn = None
                    break
                except (OSError, http.client.HTTPException) as e:
                    # nginx itself never goes away in these tests: a broken connection to it is a failure.
                    self.note("bad", "%s: connection to nginx failed: %r" % (name, e))
                    conn.close()
                    conn = None
                    break
                if st == 200:
                    text = json.loads(body).get("text")
                    if text != self.expected[name]:
                        self.note("wrong_text", "%s: %r != %r" % (name, text, self.expected[name]))
                    self.note("ok_first_try" if try_no == 1 else "ok_after_retry")
                    break
                if self.clean_error(st, hd, body):
                    if try_no == 1:
                        self.note("clean_5xx_first_try", "%s: %d %s" % (name, st, body[:200]))
                        time.sleep(min(float(hd.get("retry-after", "1")), 0.5))
                        continue
                    self.note("clean_5xx_final", "%s: %d after a retry: %s" % (name, st, body[:200]))
                    break
                self.note("bad", "%s: %d %r %s" % (name, st, hd, body[:300]))
                break
        if conn is not None:
            conn.close()

    def report(self, phase):
        c = self.c
        answered = c["ok_first_try"] + c["ok_after_retry"]
        print("%s: %d requests in %.1f s (%.1f answered/s): %d ok on the first try, %d ok after the "
              "client's retry, %d clean 5xx on the first try, %d clean 5xx after the retry, %d bad, %d hung, "
              "%d wrong transcripts" % (phase, c["requests"], self.elapsed, answered / self.elapsed,
                                        c["ok_first_try"], c["ok_after_retry"], c["clean_5xx_first_try"],
                                        c["clean_5xx_final"], c["bad"], c["hangs"], c["wrong_text"]))
        for p in self.problems[:5]:
            print("   ", p)
        sys.stdout.flush()


def nginx_retries(access_log_text, since_line):
    """(requests, requests nginx sent to more than one daemon, extra tries) in the log after a line."""
    lines = access_log_text.splitlines()[since_line:]
    reqs = retried = extra = 0
    for l in lines:
        if "uri=/v1/transcribe" not in l:
            continue
        reqs += 1
        m = re.search(r'upstream_status="([^"]*)"', l)
        tries = len(m.group(1).split(",")) if m else 1
        if tries > 1:
            retried += 1
            extra += tries - 1
    return reqs, retried, extra


@unittest.skipUnless(os.path.isfile(os.path.join(MODEL, "model.yaml")), "no model at " + MODEL)
class NginxCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(NGINX):
            raise AssertionError("no nginx (%s): deploy/install-deps.sh installs Debian's" % NGINX)
        cls.samples = sorted(glob.glob(os.path.join(MODEL, "samples", "*.npy")))
        assert cls.samples, "no samples in " + MODEL
        cls.bodies = {os.path.basename(s): read(s) for s in cls.samples}
        cls.cluster = Cluster(3)
        # The expected transcripts, straight from one daemon (no nginx in between).
        cls.expected = {}
        for name, body in cls.bodies.items():
            c = http.client.HTTPConnection("127.0.0.1", cls.cluster.daemon_port(2), timeout=CLIENT_TIMEOUT_S)
            c.request("POST", "/v1/transcribe", body=body, headers={"Content-Type": "application/x-npy"})
            r = c.getresponse()
            assert r.status == 200, r.read()
            cls.expected[name] = json.loads(r.read())["text"]
            c.close()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def post(self, body, headers=None, port=None):
        c = http.client.HTTPConnection("127.0.0.1", port or self.cluster.port, timeout=CLIENT_TIMEOUT_S)
        try:
            h = {"Content-Type": "application/x-npy"}
            h.update(headers or {})
            c.request("POST", "/v1/transcribe", body=body, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def assertNoLoss(self, load, phase, first_try_only):
        load.report(phase)
        c = load.c
        self.assertEqual((c["bad"], c["hangs"], c["wrong_text"]), (0, 0, 0), load.problems)
        self.assertGreater(c["ok_first_try"], 0)
        if first_try_only:
            self.assertEqual(c["ok_first_try"], c["requests"], load.problems)

    def test_1_request_id_through_nginx(self):
        body = self.bodies[sorted(self.bodies)[0]]
        st, hd, data = self.post(body, {"X-Request-Id": "client-id-42"})
        self.assertEqual(st, 200, data)
        self.assertEqual(json.loads(data)["id"], "client-id-42")
        self.assertEqual(hd.get("x-request-id"), "client-id-42")
        st, hd, data = self.post(body)
        self.assertEqual(st, 200, data)
        rid = json.loads(data)["id"]
        self.assertRegex(rid, r"^[0-9a-f]{32}$")  # nginx's $request_id, not the daemon's own
        self.assertEqual(hd.get("x-request-id"), rid)
        time.sleep(0.2)  # nginx writes its log line after the answer
        self.assertIn("id=%s status=200" % rid, self.cluster.access_log())

    def test_2_too_large_is_json(self):
        # A body over limits.max_body_bytes is refused by nginx with rnntd's error shape. The limit comes
        # from the daemon's effective configuration.
        conf = read(os.path.join(self.cluster.dir, "nginx.conf")).decode()
        limit = int(re.search(r"client_max_body_size (\d+);", conf).group(1))
        cfg = subprocess.run([BIN, "--print-config", "--config", os.path.join(SRC, "conf", "rnntd.yaml")],
                             capture_output=True, text=True, timeout=30).stdout
        self.assertEqual(limit, int(re.search(r"(?m)^  max_body_bytes: (\d+)$", cfg).group(1)))
        s = socket.create_connection(("127.0.0.1", self.cluster.port), timeout=CLIENT_TIMEOUT_S)
        try:
            s.sendall(b"POST /v1/transcribe HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
                      b"Content-Length: %d\r\n\r\n" % (limit + 1))
            got = b""
            while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
                d = s.recv(4096)
                if not d:
                    break
                got += d
        finally:
            s.close()
        head, _, body = got.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 413"), got[:300])
        self.assertEqual(json.loads(body)["error"]["code"], "too_large")

    def test_3_faults_under_load(self):
        # The same Python clients straight to one daemon, then through nginx to three: on a 2-core
        # machine the figures say what nginx costs, not what three daemons gain.
        direct = Load(self.cluster.daemon_port(2), self.bodies, self.expected, 6).start()
        time.sleep(3)
        direct.stop()
        self.assertNoLoss(direct, "direct to 1 daemon (no nginx), 6 clients, steady", first_try_only=True)
        steady = Load(self.cluster.port, self.bodies, self.expected, 6).start()
        time.sleep(3)
        steady.stop()
        self.assertNoLoss(steady, "nginx, 3 daemons, 6 clients, steady", first_try_only=True)

        base = len(self.cluster.access_log().splitlines())
        load = Load(self.cluster.port, self.bodies, self.expected, 6).start()
        time.sleep(1.5)
        term_pid, kill_pid = self.cluster.pid(0), self.cluster.pid(1)
        os.kill(term_pid, signal.SIGTERM)
        time.sleep(1.5)
        os.kill(kill_pid, signal.SIGKILL)
        time.sleep(2.5)
        load.stop()
        reqs, retried, extra = nginx_retries(self.cluster.access_log(), base)
        self.assertNoLoss(load, "nginx, 3 daemons, SIGTERM to one, SIGKILL to another, 6 clients", first_try_only=False)
        print("nginx access log during the faults: %d transcriptions, %d sent to a second "
              "daemon (%d extra tries)" % (reqs, retried, extra))
        # The drained daemon exited cleanly after answering what it had accepted.
        self.assertTrue(self.cluster.wait_gone(term_pid, 40), "SIGTERM'd daemon still running")
        log0 = self.cluster.daemon_log(0)
        self.assertIn('msg="shutting down: draining"', log0)
        self.assertIn("msg=stopped", log0)
        self.assertNotIn("level=error", log0)
        self.assertTrue(self.cluster.wait_gone(kill_pid, 5))

        # Both come back (same ports); nginx takes them back after fail_timeout.
        for i in (0, 1):
            r = self.cluster.run("restart", str(i))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        time.sleep(FAIL_TIMEOUT_S + 0.5)

        # Rolling restart under load: nothing lost, no client retry needed.
        base = len(self.cluster.access_log().splitlines())
        load = Load(self.cluster.port, self.bodies, self.expected, 6).start()
        time.sleep(1)
        pids = [self.cluster.pid(i) for i in range(3)]
        t = time.monotonic()
        r = self.cluster.run("rolling-restart", timeout=120)
        roll_s = time.monotonic() - t
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        time.sleep(1)
        load.stop()
        reqs, retried, extra = nginx_retries(self.cluster.access_log(), base)
        self.assertNoLoss(load, "nginx, rolling restart of 3 daemons (%.1f s), 6 clients" % roll_s, first_try_only=True)
        print("nginx access log during the rolling restart: %d transcriptions, %d sent to a second daemon "
              "(%d extra tries)" % (reqs, retried, extra))
        for i in range(3):
            self.assertNotEqual(self.cluster.pid(i), pids[i])
            self.assertTrue(self.cluster.alive(self.cluster.pid(i)))
        # nginx takes every restarted daemon back: once fail_timeout has passed, requests one after the
        # other (least_conn ties go round robin) reach all three.
        time.sleep(FAIL_TIMEOUT_S + 0.5)
        base = len(self.cluster.access_log().splitlines())
        body = self.bodies[sorted(self.bodies)[0]]
        for _ in range(12):
            st, _, data = self.post(body)
            self.assertEqual(st, 200, data)
        time.sleep(0.2)
        served = re.findall(r'upstream="([^"]*)" upstream_status="([^"]*)"',
                            "\n".join(self.cluster.access_log().splitlines()[base:]))
        ports_ok = {a.split(",")[-1].strip() for a, s in served if s.split(",")[-1].strip() == "200"}
        self.assertEqual(ports_ok, {"127.0.0.1:%d" % self.cluster.daemon_port(i) for i in range(3)})


class WebSocketStandIn:
    """A one-connection upstream that answers a WebSocket handshake with 101 and then echoes bytes."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(CLIENT_TIMEOUT_S)
        self.port = self.sock.getsockname()[1]
        self.request_head = b""
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        try:
            c, _ = self.sock.accept()
        except OSError:
            return
        c.settimeout(CLIENT_TIMEOUT_S)
        try:
            while b"\r\n\r\n" not in self.request_head:
                d = c.recv(4096)
                if not d:
                    return
                self.request_head += d
            key = re.search(rb"(?im)^sec-websocket-key:\s*(\S+)", self.request_head).group(1)
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            while True:
                d = c.recv(4096)
                if not d:
                    return
                c.sendall(d)
        except OSError:
            return
        finally:
            c.close()

    def close(self):
        self.sock.close()
        self.thread.join(5)


class NginxWebSocket(unittest.TestCase):
    """The /v1/stream block of the generated config, pointed at a stand-in upstream."""

    def test_upgrade_is_relayed(self):
        if not os.path.exists(NGINX):
            raise AssertionError("no nginx (%s)" % NGINX)
        if not os.path.isfile(os.path.join(MODEL, "model.yaml")):
            self.skipTest("no model")
        cluster = Cluster(1)
        up = WebSocketStandIn()
        d = tempfile.mkdtemp(prefix="rnntd-nginx-ws-")
        try:
            conf = read(os.path.join(cluster.dir, "nginx.conf")).decode()
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            conf = re.sub(r"server 127\.0\.0\.1:\d+ ", "server 127.0.0.1:%d " % up.port, conf)
            conf = re.sub(r"listen 127\.0\.0\.1:\d+;", "listen 127.0.0.1:%d;" % port, conf)
            conf = conf.replace(cluster.dir, d)
            os.makedirs(os.path.join(d, "tmp"))
            with open(os.path.join(d, "nginx.conf"), "w") as f:
                f.write(conf)
            r = subprocess.run([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e",
                                os.path.join(d, "error.log")], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            c = socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S)
            key = base64.b64encode(os.urandom(16))
            c.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n"
                      b"X-Request-Id: ws-1\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                got += c.recv(4096)
            self.assertTrue(got.startswith(b"HTTP/1.1 101"), got)
            self.assertIn(b"Sec-WebSocket-Accept: " + base64.b64encode(hashlib.sha1(
                key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()), got)
            # After the 101 nginx relays bytes both ways (frames are opaque to it).
            frame = b"\x81\x85" + b"\x01\x02\x03\x04" + bytes(b ^ m for b, m in zip(b"hello", b"\x01\x02\x03\x04\x01"))
            c.sendall(frame)
            echo = b""
            while len(echo) < len(frame):
                echo += c.recv(4096)
            self.assertEqual(echo, frame)
            c.close()
            head = up.request_head.decode("latin-1").lower()
            self.assertIn("upgrade: websocket\r\n", head)
            self.assertIn("connection: upgrade\r\n", head)
            self.assertIn("x-request-id: ws-1\r\n", head)
        finally:
            pidf = os.path.join(d, "nginx.pid")
            if os.path.exists(pidf):
                pid = int(read(pidf))
                os.kill(pid, signal.SIGQUIT)
                end = time.monotonic() + 10
                while time.monotonic() < end:
                    try:
                        os.kill(pid, 0)
                    except ProcessLookupError:
                        break
                    time.sleep(0.05)
            up.close()
            cluster.close()
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
