"""Test harness for rnntd: start the real daemon on a free loopback port, talk HTTP to it.

Python standard library only. Every wait is bounded; every daemon is killed at the end of its test.
Environment (set by tests/server/CMakeLists.txt):
  RNNTD_BIN     the daemon binary
  RNNT_CLI      the engine's rnnt-transcribe (independent reference transcripts)
  RNNTD_MODEL   a model directory (a committed golden model)
  RNNTD_RELOAD_FROM, RNNTD_RELOAD_TO  two models with the same feature width (reload tests)
  RNNTD_GOLDEN  tests/data/golden (expected tokens from the PyTorch reference)
  RNNTD_CONF    conf/rnntd.yaml
  RNNTD_TEST_BACKEND, RNNTD_TEST_PRECISION  backend (default cpu) and precision every daemon is
                started with (--backend/--precision); cuda + fp32 on a GPU machine runs the whole
                suite against the CUDA backend (transcripts must still equal the CPU CLI's)
"""
import array
import ast
import glob
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest

BIN = os.environ.get("RNNTD_BIN", "rnntd")
CLI = os.environ.get("RNNT_CLI", "rnnt-transcribe")
MODEL = os.environ.get("RNNTD_MODEL", "")
# Two models of the same feature width and different names (SIGHUP reload from one to the other).
RELOAD_FROM = os.environ.get("RNNTD_RELOAD_FROM", "")
RELOAD_TO = os.environ.get("RNNTD_RELOAD_TO", "")
GOLDEN = os.environ.get("RNNTD_GOLDEN", "")  # tests/data/golden
CONF = os.environ.get("RNNTD_CONF", "")
BACKEND = os.environ.get("RNNTD_TEST_BACKEND", "cpu")
PRECISION = os.environ.get("RNNTD_TEST_PRECISION", "")
# Under a sanitizer everything is slower; tests scale their time limits by this.
SLOW = float(os.environ.get("RNNTD_TEST_SLOW", "1"))


# ---------------------------------------------------------------- model and features

def model_info(model_dir):
    """feature_dim, hop_length, sample_rate and name, read from model.yaml without a YAML library."""
    with open(os.path.join(model_dir, "model.yaml")) as f:
        text = f.read()
    def val(key, indent=""):
        m = re.search(r"^%s%s:\s*([^\s#]+)" % (indent, key), text, re.M)
        return m.group(1) if m else None
    return {"feature_dim": int(val("feature_dim")), "hop_length": int(val("hop_length", r"\s+")),
            "sample_rate": int(val("sample_rate", r"\s+")), "name": val("name")}


def npy_bytes(rows, dim, values=None, dtype="<f4", shape=None):
    """A .npy image of float32 (or float16) values, row-major."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        dtype, shape if shape is not None else "(%d, %d)" % (rows, dim))
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    out = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
    if values is None:
        return out
    if dtype == "<f2":
        return out + b"".join(struct.pack("<e", v) for v in values)
    return out + array.array("f", values).tobytes()


def read_npy(path):
    """(rows, cols, list of floats) of a float32/float16 C-order .npy file."""
    data = readb(path)
    assert data[:6] == b"\x93NUMPY", path
    if data[6] == 1:
        hl = struct.unpack("<H", data[8:10])[0]
        start = 10
    else:
        hl = struct.unpack("<I", data[8:12])[0]
        start = 12
    hdr = ast.literal_eval(data[start:start + hl].decode())
    rows, cols = hdr["shape"]
    body = data[start + hl:]
    if hdr["descr"] == "<f4":
        vals = array.array("f")
        vals.frombytes(body[:rows * cols * 4])
        vals = list(vals)
    elif hdr["descr"] == "<f2":
        vals = [v[0] for v in struct.iter_unpack("<e", body[:rows * cols * 2])]
    else:
        raise ValueError("unsupported dtype " + hdr["descr"])
    return rows, cols, vals


def sample_files(model_dir):
    """The .npy inputs that ship with a model (golden utt*.npy or random_model samples/)."""
    files = sorted(glob.glob(os.path.join(model_dir, "utt*.npy")))
    files += sorted(glob.glob(os.path.join(model_dir, "samples", "*.npy")))
    return files


def random_features(rows, dim, seed):
    """Deterministic features around a log-mel's range."""
    r = random.Random(seed)
    return [round(r.gauss(-4.0, 2.5), 4) for _ in range(rows * dim)]


def json_body(rows, dim, values, **opts):
    feats = [values[t * dim:(t + 1) * dim] for t in range(rows)]
    doc = {"features": feats}
    doc.update(opts)
    return json.dumps(doc).encode()


def cli_transcripts(model_dir, files):
    """Reference texts from the engine's own CLI (no HTTP, no batching: --batch 1)."""
    out = subprocess.run([CLI, "--model", model_dir, "--backend", "cpu", "--batch", "1", "--json"] + files,
                         capture_output=True, text=True, timeout=120 * SLOW)
    if out.returncode != 0:
        raise RuntimeError("rnnt-transcribe failed: " + out.stderr)
    res = {}
    for line in out.stdout.splitlines():
        d = json.loads(line)
        res[d["file"]] = d
    return res


# ---------------------------------------------------------------- the daemon

class Daemon:
    """One rnntd process with its own config file, log file and port."""

    def __init__(self, model=None, config="", args=(), env=None, notify_socket=None, wait_ready=True,
                 port=0):
        self.dir = tempfile.mkdtemp(prefix="rnntd-test-")
        self.conf = os.path.join(self.dir, "rnntd.yaml")
        with open(self.conf, "w") as f:
            f.write(config)
        self.logpath = os.path.join(self.dir, "stderr.log")
        # model=False: the model comes from the config file (reload tests).
        self.model = MODEL if model is None else model
        cmd = [BIN, "--config", self.conf, "--listen", "127.0.0.1", "--port", str(port)]
        if self.model:
            cmd += ["--model", self.model]
        cmd += ["--backend", BACKEND] + (["--precision", PRECISION] if PRECISION else [])
        cmd += list(args)
        e = dict(os.environ)
        e.pop("NOTIFY_SOCKET", None)
        if notify_socket:
            e["NOTIFY_SOCKET"] = notify_socket
        if env:
            e.update(env)
        self.logf = open(self.logpath, "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.logf, env=e)
        self.port = None
        self.returncode = None
        if wait_ready:
            try:
                self.wait_listening()
                self.wait_ready()
            except Exception:
                self.close()
                raise

    def write_config(self, text):
        """Replaces the config file (for SIGHUP reloads)."""
        tmp = self.conf + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.conf)

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_listening(self, timeout=20):
        end = time.monotonic() + timeout * SLOW
        while time.monotonic() < end:
            m = re.search(r"msg=listening address=\S+ port=(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                raise RuntimeError("rnntd exited with %d:\n%s" % (self.proc.returncode, self.log()))
            time.sleep(0.01)
        raise RuntimeError("rnntd did not start listening:\n" + self.log())

    def wait_ready(self, timeout=30):
        end = time.monotonic() + timeout * SLOW
        while time.monotonic() < end:
            try:
                st, _, _ = self.request("GET", "/health/ready", timeout=2)
                if st == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("rnntd exited with %d:\n%s" % (self.proc.returncode, self.log()))
            time.sleep(0.02)
        raise RuntimeError("rnntd not ready:\n" + self.log())

    def conn(self, timeout=10):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout * SLOW)

    def request(self, method, path, body=None, headers=None, timeout=10, conn=None):
        """(status, headers as a lower-cased dict, body bytes)."""
        c = conn or self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            if conn is None:
                c.close()

    def transcribe(self, body, ctype="application/json", query="", headers=None, timeout=30, conn=None):
        h = {"Content-Type": ctype}
        h.update(headers or {})
        st, hd, data = self.request("POST", "/v1/transcribe" + query, body, h, timeout, conn)
        return st, hd, (json.loads(data) if data else None)

    def metrics(self):
        st, _, data = self.request("GET", "/metrics")
        assert st == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def settled_metrics(self, timeout=10):
        """Metrics once no request is held besides /metrics itself. A client has its answer
        before the server's completion callback counts it, so counters read right after the
        last reply can lag; this waits for them. Raises if requests stay held past timeout."""
        end = time.monotonic() + timeout * SLOW
        while True:
            m = self.metrics()
            if m["rnntd_requests_in_flight"] <= 1 and m["rnntd_pending_bytes"] == 0:
                return m
            if time.monotonic() > end:
                raise AssertionError("requests still held: %s" %
                                     {k: v for k, v in m.items() if "flight" in k or "pending" in k})
            time.sleep(0.02)

    def sole_connection(self, timeout=10):
        """A keep-alive socket that the daemon counts as its only open connection (/metrics on it says
        rnntd_connections 1): the connections of earlier requests, which their clients closed a moment
        ago, no longer hold a slot. Connection-cap tests start from it."""
        c = self.conn(5)
        end = time.monotonic() + timeout * SLOW
        try:
            while True:
                c.request("GET", "/metrics")  # reconnects by itself after a 503 that closed it
                r = c.getresponse()
                m = re.search(rb"(?m)^rnntd_connections (\d+)$", r.read())
                if r.status == 200 and m and int(m.group(1)) == 1 and c.sock is not None:
                    s, c.sock = c.sock, None
                    return s
                if time.monotonic() > end:
                    raise AssertionError("the daemon still counts other connections: %s" % (m and m.group(0)))
                time.sleep(0.02)
        finally:
            c.close()

    def raw(self, data, read_timeout=5, close_write=False):
        """Sends raw bytes, returns whatever comes back before the server closes or the timeout."""
        return exchange(self.port, data, read_timeout, close_write)[0]

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Signals the daemon and waits for it; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError("rnntd did not exit within %ds of %s:\n%s" % (timeout, sig, self.log()))
        self.returncode = self.proc.returncode
        return self.returncode

    def stop_clean(self, sig=signal.SIGTERM):
        """Stop (SIGTERM by default) and return the log, after checking a clean exit: status 0 and (under
        ASan/UBSan) no error or leak report."""
        rc = self.stop(sig)
        log = self.log()
        if rc != 0 or "ERROR: AddressSanitizer" in log or "runtime error:" in log:
            raise AssertionError("rnntd exited %s:\n%s" % (rc, log[-6000:]))
        return log

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def recv_to_close(s):
    """Everything the server sends on socket s until it closes the connection (within s's timeout)."""
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            return got
        got += d


def exchange(port, data, read_timeout=3.0, close_write=False):
    """Sends data on a new connection (then shuts down our side with close_write), reads until the
    server closes or read_timeout passes (scaled by SLOW). Returns (bytes received, closed by the
    server, seconds from the send to the close or the timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    t0 = time.monotonic()
    try:
        s.sendall(data)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        s.settimeout(read_timeout * SLOW)
        got, closed = b"", False
        while True:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not d:
                closed = True
                break
            got += d
        return got, closed, time.monotonic() - t0
    finally:
        s.close()


class NotifySocket:
    """A fake systemd NOTIFY_SOCKET (an AF_UNIX datagram socket in a temporary folder): a thread collects
    what the daemon sends, as (monotonic time, text). Pass .path as Daemon(notify_socket=...)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rnntd-notify-")
        self.path = os.path.join(self.dir, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.msgs = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while not self.stop.is_set():
            try:
                self.msgs.append((time.monotonic(), self.sock.recv(4096).decode()))
            except socket.timeout:
                pass
            except OSError:
                return

    def wait_for(self, text, timeout=30):
        """The first message that contains text, waiting up to timeout (scaled by SLOW)."""
        end = time.monotonic() + timeout * SLOW
        while True:
            for _, m in list(self.msgs):
                if text in m:
                    return m
            if time.monotonic() > end:
                raise AssertionError("no notify message with %r in %s" % (text, [m for _, m in self.msgs]))
            time.sleep(0.01)

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def parse_status_line(raw):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw)
    return int(m.group(1)) if m else None


def split_response(raw):
    """(status, headers dict, body) of the first response in raw bytes."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hd = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hd[k.strip().lower()] = v.strip()
    n = int(hd.get("content-length", len(body)))
    return status, hd, body[:n]


class DaemonTest(unittest.TestCase):
    """Base class: self.d is a daemon shared by the tests of one class (started in setUpClass)."""
    config = ""
    args = ()

    @classmethod
    def setUpClass(cls):
        if not MODEL or not os.path.isdir(MODEL):
            raise unittest.SkipTest("no test model (RNNTD_MODEL)")
        cls.info = model_info(MODEL)
        cls.dim = cls.info["feature_dim"]
        cls.d = Daemon(MODEL, cls.config, cls.args)

    @classmethod
    def tearDownClass(cls):
        d = getattr(cls, "d", None)
        if d:
            try:
                log = d.stop_clean()
            finally:
                d.close()
            errors = [l for l in log.splitlines() if "level=error" in l]
            if errors:
                raise AssertionError("rnntd logged errors:\n" + "\n".join(errors[:20]))

    def open_served(self, n):
        """n keep-alive connections, each known to be accepted (a request answered on it); the first is
        the daemon's only open one then, so no connection of an earlier test holds one of the slots."""
        socks = [self.d.sole_connection()]
        try:
            for _ in range(n - 1):
                s = socket.create_connection(("127.0.0.1", self.d.port), timeout=5 * SLOW)
                socks.append(s)
                s.sendall(b"GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n")
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
        except BaseException:
            for s in socks:
                s.close()
            raise
        return socks

    def wait_served(self, timeout=5):
        """Once the client has closed its connections, the daemon sees it within moments and new
        connections are served again (not refused with 503 too_many_connections): waits for that."""
        end = time.monotonic() + timeout * SLOW
        while True:
            try:
                st = self.d.request("GET", "/health/live", headers={"Connection": "close"}, timeout=5)[0]
            except OSError as e:
                st = repr(e)
            if st == 200 or time.monotonic() > end:
                break
            time.sleep(0.05)
        self.assertEqual(st, 200)

    def assertError(self, status, headers, body, want_status, want_code=None):
        """The one error shape, with the right status."""
        self.assertEqual(status, want_status, body)
        self.assertTrue(headers.get("content-type", "").startswith("application/json"), headers)
        doc = json.loads(body) if isinstance(body, (bytes, str)) else body
        self.assertEqual(set(doc.keys()), {"error"}, doc)
        self.assertEqual(set(doc["error"].keys()), {"code", "message"}, doc)
        self.assertIsInstance(doc["error"]["message"], str)
        self.assertTrue(doc["error"]["message"])
        if want_code:
            self.assertEqual(doc["error"]["code"], want_code, doc)
        if want_status in (429, 503):
            self.assertIn("retry-after", headers)
        return doc


def readb(path):
    with open(path, "rb") as f:
        return f.read()


def read_safetensors(path):
    """{name: (dtype, shape, list of values)} for F32 and I32 tensors (stdlib only)."""
    data = readb(path)
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        code = {"F32": "f", "I32": "i"}.get(t["dtype"])
        if code is None:
            continue
        a = array.array(code)
        a.frombytes(data[base + b:base + e])
        out[name] = (t["dtype"], t["shape"], list(a))
    return out
