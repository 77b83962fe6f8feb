"""Hostile clients: truncated and oversized bodies, lying Content-Lengths, slow and vanishing clients,
huge headers, junk. After each, the daemon must still answer everybody else correctly; at the end it
must exit 0 with nothing held (pending bytes 0) and, under ASan, no leak or error."""
import json
import random
import socket
import threading
import time
import unittest

from harness import SLOW, DaemonTest, json_body, npy_bytes, random_features, recv_to_close, split_response


class Hostile(DaemonTest):
    config = ("server:\n  connection_timeout_s: 2\n  request_timeout_s: 3\n  max_connections: 16\n"
              "limits:\n  max_body_bytes: 262144\n  max_json_bytes: 131072\n"
              "batching:\n  max_delay_us: 2000\n")

    def setUp(self):
        self.body = json_body(9, self.dim, random_features(9, self.dim, 11))
        st, _, self.good = self.d.transcribe(self.body)
        self.assertEqual(st, 200)

    def tearDown(self):
        # Whatever happened, a normal client is still served, with the same answer.
        st, _, doc = self.d.transcribe(self.body, timeout=20)
        self.assertEqual(st, 200, doc)
        self.assertEqual(doc["tokens"], self.good["tokens"])

    def settle(self, timeout=10):
        """Waits until no request is held (in flight besides /metrics itself; nothing pending)."""
        return self.d.settled_metrics(timeout)

    def sock(self):
        return socket.create_connection(("127.0.0.1", self.d.port), timeout=10 * SLOW)

    def head(self, ctype="application/json", length=None, extra=""):
        h = "POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: %s\r\n" % ctype
        if length is not None:
            h += "Content-Length: %d\r\n" % length
        return (h + extra + "\r\n").encode()

    def test_truncated_body_then_close(self):
        s = self.sock()
        s.sendall(self.head(length=len(self.body)) + self.body[: len(self.body) // 2])
        s.close()
        self.settle()

    def test_body_in_pieces_then_pipelined(self):
        # A .npy body over several of the transport's reads (it receives Content-Length bodies straight
        # into the request's buffer), sent in odd pieces with pauses; the last piece holds the body's end
        # and a whole second request, which must not be taken as body bytes. Both answers as alone.
        rows = max(9, 70000 // (4 * self.dim))
        body = npy_bytes(rows, self.dim, random_features(rows, self.dim, 5))
        self.assertLess(len(body), 262144)
        st, _, want = self.d.transcribe(body, ctype="application/x-npy")
        self.assertEqual(st, 200, want)
        h1 = self.head("application/x-npy", len(body))
        h2 = self.head("application/x-npy", len(body), extra="Connection: close\r\n")
        first, second = h1 + body, h2 + body
        cuts = [len(h1) + 1, len(h1) + 5003, len(h1) + 40000, len(first) - 17]
        s = self.sock()
        prev = 0
        for c in cuts:
            s.sendall(first[prev:c])
            prev = c
            time.sleep(0.05)
        s.sendall(first[prev:] + second)
        s.settimeout(20 * SLOW)
        raw = recv_to_close(s)
        s.close()
        answers = []
        while raw:
            e = raw.find(b"\r\n\r\n")
            self.assertGreater(e, 0, raw[:200])
            head = raw[:e].decode("latin-1").split("\r\n")
            n = [int(l.split(":", 1)[1]) for l in head if l.lower().startswith("content-length:")][0]
            answers.append((head[0], json.loads(raw[e + 4:e + 4 + n])))
            raw = raw[e + 4 + n:]
        self.assertEqual([a[0] for a in answers], ["HTTP/1.1 200 OK"] * 2, answers)
        for _, doc in answers:
            self.assertEqual(doc["tokens"], want["tokens"])
        self.settle()

    def test_content_length_too_small(self):
        # The first 10 bytes are taken as the body (not JSON: 400); the rest is not a request.
        raw = self.d.raw(self.head(length=10) + self.body, read_timeout=3)
        st, hd, data = split_response(raw)
        self.assertError(st, hd, data, 400, "invalid_json")
        self.settle()

    def test_content_length_too_large(self):
        # The client stops short of its Content-Length and waits: the stalled upload gets the
        # documented 408 (issue 11: it used to be closed silently by the idle timeout) and is closed.
        s = self.sock()
        s.sendall(self.head(length=len(self.body) + 100) + self.body)
        t0 = time.monotonic()
        s.settimeout(15 * SLOW)
        got = recv_to_close(s)
        st, hd, data = split_response(got)
        self.assertError(st, hd, data, 408, "request_timeout")
        self.assertEqual(hd.get("connection"), "close")
        self.assertLess(time.monotonic() - t0, 10 * SLOW)
        s.close()
        self.settle()

    def test_slow_client_does_not_block_others(self):
        # One client trickles its headers; others are served meanwhile, quickly.
        s = self.sock()
        stop = threading.Event()

        def trickle():
            data = self.head(length=len(self.body))
            for b in data:
                if stop.is_set():
                    return
                try:
                    s.send(bytes([b]))
                except OSError:
                    return
                time.sleep(0.05)

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        try:
            for _ in range(5):
                t0 = time.monotonic()
                st, _, doc = self.d.transcribe(self.body)
                self.assertEqual(st, 200)
                self.assertLess(time.monotonic() - t0, 2.0 * SLOW)
        finally:
            stop.set()
            t.join(10)
            s.close()
        self.settle()

    def test_trickled_body_gets_408(self):
        # Headers fine, then the body one byte every 0.3 s: past request_timeout_s (3 s) it is cut.
        s = self.sock()
        s.sendall(self.head(length=len(self.body)))
        got = b""
        s.settimeout(0.3)
        end = time.monotonic() + 15 * SLOW
        i = 0
        while time.monotonic() < end and i < len(self.body):
            try:
                s.send(self.body[i:i + 1])
                i += 1
            except OSError:
                break
            try:
                d = s.recv(4096)
                if not d:
                    break
                got += d
                break
            except socket.timeout:
                pass
            except OSError:
                break
        s.close()
        self.assertLess(i, len(self.body), "the whole body got through")
        st, hd, data = split_response(got)
        self.assertError(st, hd, data, 408, "request_timeout")
        self.settle()

    def test_huge_headers(self):
        for extra in ("X-Big: " + "a" * 100000 + "\r\n", "".join("X-H%d: v\r\n" % i for i in range(5000))):
            raw = self.d.raw(self.head(length=len(self.body), extra=extra) + self.body, read_timeout=3)
            if raw:  # the transport answers 431 (head over 32 KiB or 100 lines) and closes
                self.assertIn(split_response(raw)[0], (400, 413, 431))
        self.settle()

    def test_junk(self):
        rnd = random.Random(5)
        for junk in (b"GARBAGE\r\n\r\n", b"\x00\x01\x02\xff" * 100, bytes(rnd.getrandbits(8) for _ in range(4096)),
                     b"POST /v1/transcribe HTTP/9.9\r\n\r\n", b"GET / HTTP/1.1\r\n" + b"X" * 70000):
            raw = self.d.raw(junk, read_timeout=3, close_write=True)
            if raw.startswith(b"HTTP/"):
                self.assertGreaterEqual(split_response(raw)[0], 400)
        self.settle()

    def test_deep_and_huge_json(self):
        st, hd, doc = self.d.transcribe(b"[" * 100000 + b"]" * 100000)
        self.assertError(st, hd, doc, 413 if len(b"[" * 200000) > 131072 else 400)
        st, hd, doc = self.d.transcribe(b'{"features": ' + b"[" * 50000 + b"]" * 50000 + b"}")
        self.assertError(st, hd, doc, 400, "invalid_json")
        st, hd, doc = self.d.transcribe(b'{"features": [' + b"[1]," * 40000 + b"[1]]}")
        self.assertError(st, hd, doc, 413, "payload_too_large")
        st, hd, doc = self.d.transcribe(b'{"features": [["a"' + b',"a"' * 5000 + b"]]}")
        self.assertError(st, hd, doc, 422, "wrong_feature_dim")  # the row's width is checked first
        st, hd, doc = self.d.transcribe(b'{"features": [["a"' + b',"a"' * (self.dim - 1) + b"]]}")
        self.assertError(st, hd, doc, 400, "invalid_request")
        st, hd, doc = self.d.transcribe(b'{"features": [[{}' + b",{}" * (self.dim - 1) + b"]]}")
        self.assertError(st, hd, doc, 400, "invalid_request")
        st, hd, doc = self.d.transcribe(b'{"features": [[1e400' + b",0" * (self.dim - 1) + b"]]}")
        self.assertError(st, hd, doc, 400, "invalid_json")
        st, hd, doc = self.d.transcribe(b'{"features": [[-3.5e38' + b",0" * (self.dim - 1) + b"]]}")
        self.assertError(st, hd, doc, 422, "non_finite_feature")
        self.settle()

    def test_nan_inf_npy(self):
        for bad in (float("nan"), float("inf"), float("-inf")):
            vals = random_features(4, self.dim, 1)
            vals[self.dim + 1] = bad
            st, hd, doc = self.d.transcribe(npy_bytes(4, self.dim, vals), "application/x-npy")
            self.assertError(st, hd, doc, 422, "non_finite_feature")
        for dt in ("<f2",):
            vals = [0.0] * (4 * self.dim)
            body = bytearray(npy_bytes(4, self.dim, vals, dtype=dt))
            body[-2:] = b"\x00\x7c"  # float16 +Inf
            st, hd, doc = self.d.transcribe(bytes(body), "application/x-npy")
            self.assertError(st, hd, doc, 422, "non_finite_feature")

    def test_disconnect_mid_upload(self):
        for k in range(5):
            s = self.sock()
            body = npy_bytes(2000, self.dim, random_features(2000, self.dim, k))
            s.sendall(self.head("application/x-npy", len(body)) + body[: len(body) * (k + 1) // 7])
            time.sleep(0.05)
            s.close()
        self.settle()

    def test_disconnect_mid_batch(self):
        # The request is complete and queued (or decoding) when its client goes away.
        for k in range(8):
            s = self.sock()
            s.sendall(self.head(length=len(self.body)) + self.body)
            if k % 2:
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        m = self.settle()
        self.assertGreaterEqual(m["rnntd_batches_total"], 1)

    def test_expect_100_over_cap(self):
        raw = self.d.raw(self.head(length=300000, extra="Expect: 100-continue\r\n"), read_timeout=3)
        self.assertFalse(raw.startswith(b"HTTP/1.1 100"), raw[:40])
        st, hd, data = split_response(raw)
        self.assertError(st, hd, data, 413, "payload_too_large")

    def test_pipelined_and_http10(self):
        req = self.head(length=len(self.body)) + self.body
        raw = self.d.raw(req + req[:-0 or None] + b"GET /health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                         read_timeout=5)
        self.assertEqual(raw.count(b"HTTP/1.1 200"), 3, raw[:300])
        raw = self.d.raw(b"POST /v1/transcribe HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                         % len(self.body) + self.body, read_timeout=5)
        st, hd, data = split_response(raw)
        self.assertEqual(st, 200, data)
        self.assertEqual(json.loads(data)["tokens"], self.good["tokens"])

    def test_connection_limit(self):
        socks = [self.d.sole_connection()]  # no connection of an earlier test holds a slot
        try:
            for _ in range(39):
                try:
                    socks.append(self.sock())
                except OSError:
                    break
            # Beyond max_connections (16) the daemon closes new connections; those it kept still work.
            time.sleep(0.3)
            served = 0
            for s in socks[:4]:
                s.sendall(b"GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n")
                s.settimeout(5 * SLOW)
                try:
                    if s.recv(4096).startswith(b"HTTP/1.1 200"):
                        served += 1
                except OSError:
                    pass
            self.assertGreater(served, 0)
        finally:
            for s in socks:
                s.close()
        self.wait_served()  # the 40 closes seen: a new connection gets a slot (settle's own included)
        self.settle()


if __name__ == "__main__":
    unittest.main(verbosity=2)
