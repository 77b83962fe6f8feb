"""The HTTP edge (issue 11, defects 1, 2, 3 and 6): slow-header clients, connection caps, request
smuggling, unknown transfer codings, stalled bodies, strict line endings and header syntax, and the
small API fixes (/health not counting itself, 401 before 405). Raw sockets throughout, so that what
the daemon does with exact bytes is what is tested. Each test here failed against the
libmicrohttpd-based daemon (rnntd before issue 11)."""
import json
import os
import resource
import socket
import tempfile
import threading
import time
import unittest

from harness import SLOW, DaemonTest, exchange, json_body, random_features, recv_to_close, split_response


def responses(raw):
    """The status codes of every response in raw bytes (bodies skipped by Content-Length)."""
    out = []
    while raw.startswith(b"HTTP/"):
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        n = 0
        for l in lines[1:]:
            k, _, v = l.partition(":")
            if k.strip().lower() == "content-length":
                n = int(v)
        out.append(int(lines[0].split()[1]))
        raw = rest[n:]
    return out


def raise_fd_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class EdgeBase(DaemonTest):
    def setUp(self):
        self.body = json_body(9, self.dim, random_features(9, self.dim, 11))

    def tearDown(self):
        # Whatever a test did, a normal client is served and nothing is left held.
        st, _, doc = self.d.transcribe(self.body, timeout=20)
        self.assertEqual(st, 200, doc)
        self.d.settled_metrics()

    def assertCapRefuses(self, n):
        """With n connections served (the cap), one more gets 503 too_many_connections and Retry-After 1
        within moments (after its wait for a slot), is closed, and those within the cap still work."""
        socks = self.open_served(n)
        try:
            t0 = time.monotonic()
            raw, closed, _ = exchange(self.d.port, b"GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n")
            self.assertErrorClose(raw, closed, 503, "too_many_connections")
            self.assertEqual(split_response(raw)[1]["retry-after"], "1")
            self.assertLess(time.monotonic() - t0, 2.0 * SLOW)
            socks[0].sendall(b"GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n")
            self.assertTrue(socks[0].recv(4096).startswith(b"HTTP/1.1 200"))
        finally:
            for s in socks:
                s.close()
        self.wait_served()

    def post_head(self, extra="", ctype="application/json"):
        return ("POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: %s\r\n%s\r\n" % (ctype, extra)).encode()

    def assertErrorClose(self, raw, closed, status, code=None):
        """Exactly one error answer with Connection: close, and the connection closed after it."""
        self.assertTrue(raw.startswith(b"HTTP/1.1 "), raw[:200])
        self.assertEqual(responses(raw), [status], raw[:400])
        st, hd, data = split_response(raw)
        self.assertError(st, hd, data, status, code)
        self.assertEqual(hd.get("connection"), "close", hd)
        self.assertTrue(closed, "the connection stayed open after %d" % status)


class SlowHeaders(EdgeBase):
    """Defect 1: slow-header clients (slowloris) must neither hold the daemon nor its slots."""
    config = "server:\n  head_timeout_s: 3\n"

    def test_slowloris_does_not_block_others(self):
        n = 300
        raise_fd_limit(n + 200)
        socks = []
        try:
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", self.d.port), timeout=5 * SLOW)
                s.sendall(b"POST /v1/transcribe HTTP/1.1\r\n")
                socks.append(s)
            t_open = time.monotonic()
            stop = threading.Event()

            def trickle():
                k = 0
                while not stop.is_set():
                    for s in socks:
                        try:
                            s.send(b"X-Slow-%d: x\r\n" % k)
                        except OSError:
                            pass
                    k += 1
                    stop.wait(0.5)

            t = threading.Thread(target=trickle, daemon=True)
            t.start()
            try:
                # 300 slow clients (more than the old default cap of 256) and a normal client is
                # still served at once.
                lat = []
                for _ in range(5):
                    t0 = time.monotonic()
                    st, _, doc = self.d.transcribe(self.body, timeout=10)
                    lat.append(time.monotonic() - t0)
                    self.assertEqual(st, 200, doc)
                self.assertLess(max(lat), 2.0 * SLOW, lat)
                self.assertLess(time.monotonic() - t_open, 3.0, "the attack ended before the check")
                # Every slow head gets 408 and a close once head_timeout_s (3 s) has passed.
                deadline = time.monotonic() + 10 * SLOW
                answered = 0
                for s in socks:
                    s.settimeout(max(0.1, deadline - time.monotonic()))
                    got = b""
                    try:
                        while True:
                            d = s.recv(4096)
                            if not d:
                                break
                            got += d
                    except (socket.timeout, ConnectionResetError):
                        pass
                    if responses(got) == [408]:
                        answered += 1
                self.assertEqual(answered, n)
                self.assertGreater(time.monotonic() - t_open, 2.5)  # not before the deadline
            finally:
                stop.set()
                t.join(10)
        finally:
            for s in socks:
                s.close()
        m = self.d.settled_metrics()
        self.assertGreaterEqual(m['rnntd_requests_total{endpoint="other",code="408"}'], n)

    def test_head_deadline_counts_from_first_byte(self):
        # An idle connection is not a slow head: it is kept until connection_timeout_s (30 s).
        s = socket.create_connection(("127.0.0.1", self.d.port), timeout=5 * SLOW)
        try:
            time.sleep(3.6)
            s.sendall(b"GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n")
            s.settimeout(5 * SLOW)
            self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
            # The head of a second request on the same connection has its own deadline.
            s.sendall(b"GET /health/live HTTP/1.1\r\n")
            t0 = time.monotonic()
            got = recv_to_close(s)
            self.assertEqual(responses(got), [408])
            self.assertGreater(time.monotonic() - t0, 2.5)
        finally:
            s.close()


class ConnectionCap(EdgeBase):
    """Defect 1: connections over server.max_connections get 503 + Retry-After and are closed."""
    config = "server:\n  max_connections: 8\n"

    def test_over_the_cap_refused_with_503(self):
        self.assertCapRefuses(8)


class PerAddressCap(EdgeBase):
    config = "server:\n  max_connections_per_ip: 3\n"

    def test_per_address_cap(self):
        self.assertCapRefuses(3)


class Framing(EdgeBase):
    """Defects 2 and 3: request smuggling, unknown codings, stalled bodies."""
    config = "server:\n  connection_timeout_s: 2\n  request_timeout_s: 4\n"

    def test_content_length_and_chunked_is_400_and_close(self):
        smuggled = b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"
        for te in ("chunked", "Chunked"):
            req = self.post_head("Content-Length: %d\r\nTransfer-Encoding: %s\r\n" % (5 + len(smuggled), te))
            raw, closed, dt = exchange(self.d.port, req + b"0\r\n\r\n" + smuggled)
            self.assertErrorClose(raw, closed, 400, "invalid_request")
            self.assertNotIn(b"rnntd_", raw)  # the smuggled /metrics never ran
            self.assertLess(dt, 2.0 * SLOW)
        # The other order of the headers, and a GET.
        raw, closed, _ = exchange(self.d.port, b"GET /health HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                                  b"Content-Length: 3\r\n\r\n0\r\n\r\n" + smuggled)
        self.assertErrorClose(raw, closed, 400, "invalid_request")

    def test_duplicate_content_length(self):
        for a, b in ((len(self.body), len(self.body) + 10), (len(self.body), len(self.body)), (10, len(self.body))):
            req = self.post_head("Content-Length: %d\r\nContent-Length: %d\r\n" % (a, b))
            raw, closed, _ = exchange(self.d.port, req + self.body)
            self.assertErrorClose(raw, closed, 400, "invalid_request")
        raw, closed, _ = exchange(self.d.port, self.post_head("Content-Length: %d, %d\r\n" % (len(self.body), len(self.body)))
                                  + self.body)
        self.assertErrorClose(raw, closed, 400, "invalid_request")

    def test_unknown_codings_answered_at_once(self):
        for te, status, code in (("xchunked", 400, "invalid_request"), ("chunked, identity", 400, "invalid_request"),
                                 ("identity, chunked", 501, "unsupported_transfer_coding"),
                                 ("gzip, chunked", 501, "unsupported_transfer_coding"),
                                 ("identity", 400, "invalid_request")):
            with self.subTest(te=te):
                req = self.post_head("Transfer-Encoding: %s\r\n" % te)
                raw, closed, dt = exchange(self.d.port, req + b"5\r\nhello\r\n0\r\n\r\n")
                self.assertErrorClose(raw, closed, status, code)
                self.assertLess(dt, 1.0 * SLOW)

    def test_bad_chunk_framing(self):
        for chunks in (b"5\r\nhelloEXTRA\r\n0\r\n\r\n", b"5\nhello\r\n0\r\n\r\n", b"zz\r\n", b"5\r\nhello\r\n0\r\n\n"):
            raw, closed, dt = exchange(self.d.port, self.post_head("Transfer-Encoding: chunked\r\n") + chunks)
            self.assertErrorClose(raw, closed, 400, "invalid_chunked_body")
            self.assertLess(dt, 1.0 * SLOW)

    def test_stalled_bodies_get_408(self):
        # Shorter than its Content-Length: 408 after connection_timeout_s (2 s), not a silent close.
        req = self.post_head("Content-Length: %d\r\n" % (len(self.body) + 100)) + self.body
        raw, closed, dt = exchange(self.d.port, req, read_timeout=10)
        self.assertErrorClose(raw, closed, 408, "request_timeout")
        self.assertLess(dt, 4.0 * SLOW)
        # A chunked body that stops mid-way.
        raw, closed, dt = exchange(self.d.port, self.post_head("Transfer-Encoding: chunked\r\n") + b"100\r\nabc",
                                   read_timeout=10)
        self.assertErrorClose(raw, closed, 408, "request_timeout")
        # A body that keeps trickling (never stalls 2 s) is cut at request_timeout_s (4 s).
        s = socket.create_connection(("127.0.0.1", self.d.port), timeout=5 * SLOW)
        try:
            s.sendall(self.post_head("Transfer-Encoding: chunked\r\n"))
            t0 = time.monotonic()
            s.settimeout(0.5)
            got = b""
            while time.monotonic() - t0 < 12 * SLOW and not got:
                try:
                    s.sendall(b"1\r\n \r\n")
                    got = s.recv(4096)
                except socket.timeout:
                    pass
                except OSError:
                    break
            self.assertEqual(responses(got), [408], got[:200])
            self.assertGreater(time.monotonic() - t0, 3.5)
        finally:
            s.close()


class Syntax(EdgeBase):
    """Defect 6: bare LF line endings and obs-folded headers are rejected; other strict rules."""

    def test_bare_lf_rejected(self):
        for req in (b"GET /health/live HTTP/1.1\nHost: t\n\n", b"GET /health/live HTTP/1.1\r\nHost: t\n\r\n",
                    b"GET /health/live HTTP/1.1\r\nHost: t\r\n\n"):
            raw, closed, dt = exchange(self.d.port, req)
            self.assertErrorClose(raw, closed, 400, "invalid_request")
            self.assertLess(dt, 1.0 * SLOW)

    def test_obs_fold_rejected(self):
        raw, closed, _ = exchange(self.d.port, b"GET /health/live HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n")
        self.assertErrorClose(raw, closed, 400, "invalid_request")
        raw, closed, _ = exchange(self.d.port, b"GET /health/live HTTP/1.1\r\nHost: t\r\nX-A: a\r\n\tb\r\n\r\n")
        self.assertErrorClose(raw, closed, 400, "invalid_request")

    def test_other_strict_rules(self):
        cases = [
            (b"GET /health/live HTTP/1.1\r\n\r\n", 400, "invalid_request"),                       # no Host
            (b"GET /health/live HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "invalid_request"),
            (b"GET /health/live HTTP/1.1\r\nHost : t\r\n\r\n", 400, "invalid_request"),
            (b"GET /health/live HTTP/2.0\r\nHost: t\r\n\r\n", 505, "http_version_not_supported"),
            (b"GET /health/live HTTP/1.1\r\nHost: t\r\nExpect: tea\r\n\r\n", 417, "expectation_failed"),
            (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414, "uri_too_long"),
            (b"GET / HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(120)) + b"\r\n",
             431, "headers_too_large"),
            (b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", 431, "headers_too_large"),
        ]
        for req, status, code in cases:
            with self.subTest(req=req[:50]):
                raw, closed, _ = exchange(self.d.port, req)
                self.assertErrorClose(raw, closed, status, code)
        m = self.d.settled_metrics()
        self.assertGreaterEqual(m['rnntd_requests_total{endpoint="other",code="400"}'], 3)

    def test_expect_continue_and_head(self):
        s = socket.create_connection(("127.0.0.1", self.d.port), timeout=10 * SLOW)
        try:
            s.sendall(self.post_head("Content-Length: %d\r\nExpect: 100-continue\r\n" % len(self.body)))
            self.assertEqual(s.recv(4096), b"HTTP/1.1 100 Continue\r\n\r\n")
            s.sendall(self.body)
            got = b""
            while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < int(
                    split_response(got)[1].get("content-length", 1 << 30)):
                d = s.recv(65536)
                if not d:
                    break
                got += d
            self.assertEqual(split_response(got)[0], 200)
            # HEAD on the same connection: headers, no body; the connection stays usable.
            s.sendall(b"HEAD /health HTTP/1.1\r\nHost: t\r\n\r\n")
            time.sleep(0.3)
            head = s.recv(65536)
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:100])
            self.assertTrue(head.endswith(b"\r\n\r\n"), head[-100:])
            self.assertGreater(int(split_response(head)[1]["content-length"]), 0)
            s.sendall(b"GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n")
            self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
        finally:
            s.close()

    def test_health_does_not_count_itself(self):
        for _ in range(3):
            st, _, body = self.d.request("GET", "/health")
            self.assertEqual(st, 200)
            self.assertEqual(json.loads(body)["requests"]["in_flight"], 0)
            self.assertEqual(self.d.metrics()["rnntd_requests_in_flight"], 0)


class AuthBeforeMethod(EdgeBase):
    """Defect 6: with auth on, GET /v1/transcribe without a token is 401, not 405."""

    @classmethod
    def setUpClass(cls):
        cls.tokdir = tempfile.mkdtemp(prefix="rnntd-tok-")
        cls.tokfile = os.path.join(cls.tokdir, "token")
        with open(cls.tokfile, "w") as f:
            f.write("edge-token\n")
        os.chmod(cls.tokfile, 0o600)
        cls.config = "server:\n  auth_token_file: \"%s\"\n" % cls.tokfile
        super().setUpClass()

    def tearDown(self):
        st, _, doc = self.d.transcribe(self.body, headers={"Authorization": "Bearer edge-token"}, timeout=20)
        self.assertEqual(st, 200, doc)

    def test_401_before_405(self):
        for m in ("GET", "PUT", "DELETE"):
            st, hd, body = self.d.request(m, "/v1/transcribe")
            self.assertError(st, hd, body, 401, "unauthorized")
            self.assertEqual(hd["www-authenticate"], "Bearer")
            st, hd, body = self.d.request(m, "/v1/transcribe", headers={"Authorization": "Bearer edge-token"})
            self.assertError(st, hd, body, 405, "method_not_allowed")
            self.assertEqual(hd["allow"], "POST")


class FdLimit(unittest.TestCase):
    """max_connections beyond what RLIMIT_NOFILE allows: the cap is lowered to fit (logged), and
    connections over it get 503 instead of failing accept() with EMFILE."""

    def test_cap_fits_the_descriptor_limit(self):
        from harness import BIN, MODEL
        import shutil
        import signal
        import subprocess
        if not MODEL or not shutil.which("prlimit"):
            self.skipTest("no model or no prlimit")
        d = tempfile.mkdtemp(prefix="rnntd-fd-")
        logpath = os.path.join(d, "stderr.log")
        with open(logpath, "wb") as log:
            p = subprocess.Popen(["prlimit", "--nofile=300:300", BIN, "--listen", "127.0.0.1", "--port", "0",
                                  "--model", MODEL, "--backend", "cpu"], stdout=subprocess.DEVNULL, stderr=log)
        socks = []
        try:
            port, end = None, time.monotonic() + 30 * SLOW
            while port is None and time.monotonic() < end:
                text = open(logpath).read()
                m = __import__("re").search(r"msg=listening address=\S+ port=(\d+) http_threads=\d+ max_connections=(\d+)", text)
                if m:
                    port, cap = int(m.group(1)), int(m.group(2))
                time.sleep(0.05)
            self.assertIsNotNone(port, open(logpath).read())
            self.assertIn("allows fewer connections than server.max_connections", open(logpath).read())
            self.assertLess(cap, 300)
            while time.monotonic() < end:
                raw, _, _ = exchange(port, b"GET /health/ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                if responses(raw) == [200]:
                    break
                time.sleep(0.05)
            for _ in range(cap + 10):
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW))
            time.sleep(1.5 * SLOW)  # those over the cap wait 0.5 s for a slot, then get 503
            refused = 0
            for s in socks:
                s.settimeout(0.01)
                try:
                    if s.recv(4096).startswith(b"HTTP/1.1 503"):
                        refused += 1
                except socket.timeout:
                    pass
            self.assertEqual(refused, 10)
        finally:
            for s in socks:
                s.close()
            p.send_signal(signal.SIGTERM)
            rc = p.wait(30 * SLOW)
            log = open(logpath).read()
            self.assertEqual(rc, 0, log[-3000:])
            self.assertNotIn("level=error", log)
            self.assertNotIn("ERROR: AddressSanitizer", log)


class ManyIdle(EdgeBase):
    """Idle connections are cheap: 1000 open at once, and a normal client is served."""

    def test_thousand_idle_connections(self):
        n = 1000
        if raise_fd_limit(n + 200) < n + 100:
            self.skipTest("the open-file limit is too low for this test")
        socks = []
        try:
            for _ in range(n):
                socks.append(socket.create_connection(("127.0.0.1", self.d.port), timeout=5 * SLOW))
            deadline = time.monotonic() + 10 * SLOW
            while self.d.metrics()["rnntd_connections"] < n and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertGreaterEqual(self.d.metrics()["rnntd_connections"], n)
            t0 = time.monotonic()
            st, _, doc = self.d.transcribe(self.body)
            self.assertEqual(st, 200, doc)
            self.assertLess(time.monotonic() - t0, 2.0 * SLOW)
        finally:
            for s in socks:
                s.close()


class LoopBalance(EdgeBase):
    """Connections opened in a burst (a load tool's clients all at once) are spread over the event
    loops: the loop that accepts hands each to the loop with the fewest (/metrics
    rnntd_http_loop_connections). Kept on the accepting loop, a burst lands on one or two loops, whose
    cores then bound the throughput (issue 16 §3; RNNTD_TP_BALANCE=0 shows it)."""
    config = "server:\n  http_threads: 4\n"

    def test_burst_spread_over_loops(self):
        n = 64
        socks = []
        try:
            for _ in range(n):
                socks.append(socket.create_connection(("127.0.0.1", self.d.port), timeout=5 * SLOW))
            deadline = time.monotonic() + 10 * SLOW
            while True:
                m = self.d.metrics()
                loops = [v for k, v in m.items() if k.startswith("rnntd_http_loop_connections{")]
                if sum(loops) >= n or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertEqual(len(loops), 4, m)
            self.assertGreaterEqual(sum(loops), n)
            # n / 4 each; the scrapes' own connections (one open, one maybe closing) may add to any loop
            self.assertLessEqual(max(loops) - min(loops), 2, loops)
            # every connection of the burst is served by its loop
            for s in socks:
                s.sendall(b"GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n")
            for s in socks:
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
        finally:
            for s in socks:
                s.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
