"""rnntd over HTTP: every endpoint, both body types, chunked uploads, options, errors, auth."""
import json
import os
import socket
import tempfile
import time
import unittest

from harness import (BACKEND, GOLDEN, MODEL, SLOW, read_safetensors, Daemon, DaemonTest, cli_transcripts, json_body, model_info, npy_bytes, readb,
                     random_features, read_npy, recv_to_close, sample_files, split_response)


def make_inputs(dim, tmpdir, lengths=(1, 7, 40, 133, 301), seed=1):
    """Random feature files of odd lengths plus the model's own samples: [(path, rows, values)]."""
    out = []
    for i, n in enumerate(lengths):
        vals = random_features(n, dim, seed * 1000 + i)
        path = os.path.join(tmpdir, "rand%03d_%d.npy" % (i, n))
        with open(path, "wb") as f:
            f.write(npy_bytes(n, dim, vals))
        out.append((path, n, read_npy(path)[2]))  # values as float32 rounded them
    for p in sample_files(MODEL):
        rows, cols, vals = read_npy(p)
        if cols == dim and rows > 0:  # zero frames is a client error (422), see test_zero_frames
            out.append((p, rows, vals))
    return out


class Api(DaemonTest):
    config = "limits:\n  max_frames: 2000\n"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="rnntd-api-")
        cls.inputs = make_inputs(cls.dim, cls.tmp)
        cls.ref = cli_transcripts(MODEL, [p for p, _, _ in cls.inputs])

    def check_result(self, doc, path, rows, timestamps=True):
        ref = self.ref[path]
        self.assertEqual(doc["text"], ref["text"])
        self.assertEqual([t["id"] for t in doc["tokens"]], [t["id"] for t in ref["tokens"]])
        self.assertEqual([t["token"] for t in doc["tokens"]], [t["token"] for t in ref["tokens"]])
        if timestamps:
            self.assertEqual([t["frame"] for t in doc["tokens"]], [t["frame"] for t in ref["tokens"]])
            for t, r in zip(doc["tokens"], ref["tokens"]):
                self.assertAlmostEqual(t["time_s"], r["time_s"], places=5)
        else:
            for t in doc["tokens"]:
                self.assertEqual(set(t.keys()), {"id", "token"})
        self.assertEqual(doc["frames"], rows)
        self.assertAlmostEqual(doc["duration_s"], rows * self.info["hop_length"] / self.info["sample_rate"], places=6)
        self.assertEqual(doc["model"], self.info["name"])
        self.assertEqual(set(doc["timings"].keys()), {"queue_ms", "compute_ms", "total_ms"})
        self.assertGreaterEqual(doc["timings"]["total_ms"], doc["timings"]["queue_ms"])
        self.assertGreaterEqual(doc["batch_size"], 1 if rows else 0)  # zero frames skip the engine

    # ---- endpoints

    def test_health(self):
        st, hd, body = self.d.request("GET", "/health")
        self.assertEqual(st, 200)
        doc = json.loads(body)
        for k in ("status", "ready", "version", "model", "backend", "device", "uptime_s", "requests",
                  "queue_depth", "batches", "mean_batch_size", "audio_seconds", "real_time_factor"):
            self.assertIn(k, doc)
        self.assertEqual(doc["status"], "ok")
        self.assertTrue(doc["ready"])
        self.assertEqual(doc["backend"], BACKEND)
        self.assertEqual(doc["model"]["name"], self.info["name"])
        self.assertEqual(doc["model"]["feature_dim"], self.dim)
        self.assertEqual(set(doc["requests"].keys()), {"ok", "failed", "in_flight"})
        st, _, body = self.d.request("GET", "/health/live")
        self.assertEqual((st, json.loads(body)), (200, {"status": "alive"}))
        st, _, body = self.d.request("GET", "/health/ready")
        self.assertEqual((st, json.loads(body)), (200, {"status": "ready"}))
        st, hd, body = self.d.request("HEAD", "/health")
        self.assertEqual((st, body), (200, b""))

    def test_metrics(self):
        st, hd, body = self.d.request("GET", "/metrics")
        self.assertEqual(st, 200)
        self.assertTrue(hd["content-type"].startswith("text/plain; version=0.0.4"))
        text = body.decode()
        for name, kind in (("rnntd_requests_total", "counter"), ("rnntd_request_duration_seconds", "histogram"),
                           ("rnntd_queue_duration_seconds", "histogram"), ("rnntd_compute_duration_seconds", "histogram"),
                           ("rnntd_batch_size", "histogram"), ("rnntd_request_audio_seconds", "histogram"),
                           ("rnntd_audio_seconds_total", "counter"), ("rnntd_batches_total", "counter"),
                           ("rnntd_requests_in_flight", "gauge"), ("rnntd_queue_depth", "gauge"),
                           ("rnntd_ready", "gauge"), ("rnntd_rejected_total", "counter")):
            self.assertIn("# TYPE %s %s\n" % (name, kind), text)
            self.assertIn("# HELP %s " % name, text)
        # Every sample line is NAME{labels} VALUE with a number.
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            name, value = line.rsplit(" ", 1)
            float(value)
            self.assertRegex(name, r'^rnntd_[a-z_]+(\{([a-z_]+="[^"]*",?)+\})?$')
        m = self.d.metrics()
        self.assertEqual(m["rnntd_ready"], 1)
        # Histogram buckets are cumulative.
        b = [v for k, v in m.items() if k.startswith("rnntd_batch_size_bucket")]
        self.assertEqual(b, sorted(b))

    def test_not_found_and_methods(self):
        st, hd, body = self.d.request("GET", "/nope")
        self.assertError(st, hd, body, 404, "not_found")
        st, hd, body = self.d.request("GET", "/v1/transcribe")
        self.assertError(st, hd, body, 405, "method_not_allowed")
        self.assertEqual(hd["allow"], "POST")
        for m in ("POST", "PUT", "DELETE"):
            st, hd, body = self.d.request(m, "/health", body=b"x")
            self.assertError(st, hd, body, 405, "method_not_allowed")
            self.assertEqual(hd["allow"], "GET, HEAD")
        st, hd, body = self.d.request("DELETE", "/metrics")
        self.assertError(st, hd, body, 405)

    # ---- transcription

    def test_json_and_npy_bodies(self):
        for path, rows, vals in self.inputs:
            with self.subTest(path=os.path.basename(path)):
                st, hd, doc = self.d.transcribe(json_body(rows, self.dim, vals))
                self.assertEqual(st, 200, doc)
                self.check_result(doc, path, rows)
                self.assertEqual(hd["x-request-id"], doc["id"])
                st, hd, doc = self.d.transcribe(readb(path), "application/x-npy")
                self.assertEqual(st, 200, doc)
                self.check_result(doc, path, rows)

    def test_float16_npy(self):
        path, rows, vals = self.inputs[2]
        st, _, doc = self.d.transcribe(npy_bytes(rows, self.dim, vals, dtype="<f2"), "application/x-npy")
        self.assertEqual(st, 200, doc)
        self.assertEqual(doc["frames"], rows)

    def test_chunked_upload(self):
        path, rows, vals = self.inputs[3]
        for ctype, body in (("application/x-npy", readb(path)),
                            ("application/json", json_body(rows, self.dim, vals))):
            # Chunks of 1..97 bytes, sent with pauses, so the body really arrives piecewise.
            req = ("POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: %s\r\n"
                   "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" % ctype).encode()
            s = socket.create_connection(("127.0.0.1", self.d.port), timeout=10 * SLOW)
            s.sendall(req)
            i, k = 0, 0
            while i < len(body):
                n = 1 + (k * 31) % 97
                part = body[i:i + n]
                s.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                i += n
                k += 1
                if k % 50 == 0:
                    time.sleep(0.01)
            s.sendall(b"0\r\n\r\n")
            got = recv_to_close(s)
            s.close()
            st, hd, data = split_response(got)
            self.assertEqual(st, 200, data)
            self.check_result(json.loads(data), path, rows)

    def test_keep_alive_and_request_id(self):
        c = self.d.conn()
        path, rows, vals = self.inputs[1]
        for i in range(5):
            st, hd, doc = self.d.transcribe(json_body(rows, self.dim, vals), headers={"X-Request-Id": "abc-%d" % i},
                                            conn=c)
            self.assertEqual(st, 200)
            self.assertEqual(doc["id"], "abc-%d" % i)
            self.assertEqual(hd["x-request-id"], "abc-%d" % i)
            st, _, _ = self.d.request("GET", "/health", conn=c)
            self.assertEqual(st, 200)
        c.close()
        # An unusable id is replaced by a generated one.
        st, hd, doc = self.d.transcribe(json_body(rows, self.dim, vals), headers={"X-Request-Id": "a b\"c"})
        self.assertEqual(st, 200)
        self.assertNotEqual(doc["id"], 'a b"c')

    def test_options_do_not_leak(self):
        path, rows, vals = self.inputs[3]
        for _ in range(3):
            st, _, doc = self.d.transcribe(json_body(rows, self.dim, vals, timestamps=False))
            self.assertEqual(st, 200)
            self.check_result(doc, path, rows, timestamps=False)
            st, _, doc = self.d.transcribe(readb(path), "application/x-npy", query="?timestamps=false")
            self.assertEqual(st, 200)
            self.check_result(doc, path, rows, timestamps=False)
            st, _, doc = self.d.transcribe(json_body(rows, self.dim, vals))
            self.assertEqual(st, 200)
            self.check_result(doc, path, rows, timestamps=True)

    def test_zero_frames(self):
        # An utterance of zero frames is the client's mistake (issue 11), not an empty transcript.
        st, hd, doc = self.d.transcribe(b'{"features": []}')
        self.assertError(st, hd, doc, 422, "empty_utterance")
        st, hd, doc = self.d.transcribe(npy_bytes(0, self.dim, []), "application/x-npy")
        self.assertError(st, hd, doc, 422, "empty_utterance")
        m = self.d.settled_metrics()
        self.assertGreaterEqual(m['rnntd_requests_total{endpoint="transcribe",code="422"}'], 2)

    # ---- errors

    def test_media_type_and_length(self):
        body = json_body(1, self.dim, [0.0] * self.dim)
        st, hd, doc = self.d.transcribe(body, "text/plain")
        self.assertError(st, hd, doc, 415, "unsupported_media_type")
        st, hd, data = self.d.request("POST", "/v1/transcribe", body, {})
        self.assertError(st, hd, data, 415)
        st, hd, doc = self.d.transcribe(body, "application/json; charset=utf-8")
        self.assertEqual(st, 200)
        # No Content-Length and not chunked: 411.
        raw = self.d.raw(b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\r\n")
        st, hd, data = split_response(raw)
        self.assertError(st, hd, data, 411, "length_required")
        # Empty body.
        st, hd, doc = self.d.transcribe(b"")
        self.assertError(st, hd, doc, 400, "empty_body")

    def test_bad_bodies(self):
        dim = self.dim
        cases = [
            (b"{", 400, "invalid_json"),
            (b'{"features": [[1,2', 400, "invalid_json"),
            (b"[[0]]", 400, "invalid_request"),
            (b'{"features": "abc"}', 400, "invalid_request"),
            (('{"features": [[%s"x"]]}' % ("0," * (dim - 1))).encode(), 400, "invalid_request"),
            (('{"features": [[%snull]]}' % ("0," * (dim - 1))).encode(), 400, "invalid_request"),
            (b'{"features": [[' + b"0," * dim + b'0]]}', 422, "wrong_feature_dim"),
            (b'{"features": [[0]]}' if dim != 1 else b'{"features": [[0,0]]}', 422, "wrong_feature_dim"),
            (('{"features": [[%s1e39]]}' % ("0," * (dim - 1))).encode(), 422, "non_finite_feature"),
            (('{"features": [[%sNaN]]}' % ("0," * (dim - 1))).encode(), 400, "invalid_json"),
            (('{"features": [[%s1]], "speed": 2}' % ("0," * (dim - 1))).encode(), 400, "invalid_request"),
            (b"[" * 5000 + b"]" * 5000, 400, "invalid_json"),
        ]
        for body, status, code in cases:
            with self.subTest(body=body[:60]):
                st, hd, doc = self.d.transcribe(body)
                self.assertError(st, hd, doc, status, code)
        npy_cases = [
            (npy_bytes(2, dim + 1, [0.0] * (2 * (dim + 1))), 422, "wrong_feature_dim"),
            (npy_bytes(2, dim, [0.0] * (2 * dim - 1) + [float("nan")]), 422, "non_finite_feature"),
            (npy_bytes(2, dim, [float("inf")] + [0.0] * (2 * dim - 1)), 422, "non_finite_feature"),
            (npy_bytes(2, dim, [0.0] * (2 * dim))[:-3], 400, "invalid_npy"),
            (npy_bytes(2, dim, [0.0] * (2 * dim), dtype="<f8"), 400, "invalid_npy"),
            (npy_bytes(2, dim, [0.0] * (2 * dim), shape="(2, %d, 1)" % dim), 400, "invalid_npy"),
            (b"not an npy at all", 400, "invalid_npy"),
            (npy_bytes(2001, dim, [0.0] * (2001 * dim)), 413, "too_many_frames"),
        ]
        for body, status, code in npy_cases:
            with self.subTest(npy=body[:60]):
                st, hd, doc = self.d.transcribe(body, "application/x-npy")
                self.assertError(st, hd, doc, status, code)
        st, hd, doc = self.d.transcribe(json_body(2001, dim, [0.0] * (2001 * dim)))
        self.assertError(st, hd, doc, 413, "too_many_frames")
        st, hd, doc = self.d.transcribe(json_body(1, dim, [0.0] * dim), query="?timestamps=maybe")
        self.assertError(st, hd, doc, 400, "invalid_parameter")
        st, hd, doc = self.d.transcribe(json_body(1, dim, [0.0] * dim), query="?lang=en")
        self.assertError(st, hd, doc, 400, "invalid_parameter")
        # Errors are counted by status.
        m = self.d.settled_metrics()
        self.assertGreaterEqual(m['rnntd_requests_total{endpoint="transcribe",code="422"}'], 4)


class BodyCaps(DaemonTest):
    """Small caps: 413 before the body is read (Content-Length) or as the cap is crossed (chunked)."""
    config = "limits:\n  max_body_bytes: 8192\n  max_json_bytes: 4096\n"

    def test_content_length_over_cap(self):
        # The answer comes right after the headers: the client never sends the body.
        raw = self.d.raw(b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-npy\r\n"
                         b"Content-Length: 8193\r\n\r\n", read_timeout=5)
        st, hd, data = split_response(raw)
        self.assertError(st, hd, data, 413, "payload_too_large")
        raw = self.d.raw(b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 4097\r\n\r\n", read_timeout=5)
        st, hd, data = split_response(raw)
        self.assertError(st, hd, data, 413, "payload_too_large")
        raw = self.d.raw(b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 99999999999999999999999\r\n\r\n", read_timeout=5)
        self.assertIn(split_response(raw)[0], (400, 413))

    def test_chunked_over_cap_answers_at_once(self):
        s = socket.create_connection(("127.0.0.1", self.d.port), timeout=10 * SLOW)
        s.sendall(b"POST /v1/transcribe HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-npy\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        s.settimeout(0.05)
        got, sent = b"", 0
        deadline = time.monotonic() + 10 * SLOW
        while not got and time.monotonic() < deadline and sent < 1 << 20:
            try:
                s.sendall(b"400\r\n" + b"a" * 1024 + b"\r\n")
                sent += 1024
            except OSError:
                break
            try:
                got = s.recv(65536)
            except socket.timeout:
                pass
        s.close()
        self.assertTrue(got, "no answer while uploading")
        st, hd, data = split_response(got)
        self.assertError(st, hd, data, 413, "payload_too_large")
        # Answered within a few KiB of the cap, not at the end of the upload.
        self.assertLessEqual(sent, 8192 + 4 * 1024)

    def test_under_cap_fine(self):
        st, _, doc = self.d.transcribe(json_body(2, self.dim, [0.5] * (2 * self.dim)))
        self.assertEqual(st, 200, doc)


class Auth(DaemonTest):
    @classmethod
    def setUpClass(cls):
        cls.tokdir = tempfile.mkdtemp(prefix="rnntd-tok-")
        cls.tokfile = os.path.join(cls.tokdir, "token")
        with open(cls.tokfile, "w") as f:
            f.write("s3cret-Token_1\n")
        os.chmod(cls.tokfile, 0o600)
        cls.config = "server:\n  auth_token_file: \"%s\"\n" % cls.tokfile
        super().setUpClass()

    def test_auth(self):
        body = json_body(3, self.dim, [0.1] * (3 * self.dim))
        st, hd, doc = self.d.transcribe(body)
        self.assertError(st, hd, doc, 401, "unauthorized")
        self.assertEqual(hd["www-authenticate"], "Bearer")
        for bad in ("Bearer s3cret-Token_2", "Bearer s3cret-Token_", "Bearer s3cret-Token_11", "Basic czNjcmV0",
                    "Bearer ", "s3cret-Token_1"):
            st, hd, doc = self.d.transcribe(body, headers={"Authorization": bad})
            self.assertError(st, hd, doc, 401, "unauthorized")
        st, _, doc = self.d.transcribe(body, headers={"Authorization": "Bearer s3cret-Token_1"})
        self.assertEqual(st, 200, doc)
        st, _, doc = self.d.transcribe(body, headers={"Authorization": "bearer s3cret-Token_1"})
        self.assertEqual(st, 200, doc)
        # Health and metrics stay open.
        for p in ("/health", "/health/live", "/health/ready", "/metrics"):
            self.assertEqual(self.d.request("GET", p)[0], 200)


class Golden(unittest.TestCase):
    """Every golden model through HTTP: tokens and frames equal the PyTorch reference's, batched."""

    def test_golden_cases(self):
        if not GOLDEN or not os.path.isdir(GOLDEN):
            self.skipTest("no golden data (RNNTD_GOLDEN)")
        cases = sorted(d for d in os.listdir(GOLDEN) if os.path.isfile(os.path.join(GOLDEN, d, "golden.safetensors")))
        self.assertTrue(cases)
        for case in cases:
            with self.subTest(case=case):
                mdir = os.path.join(GOLDEN, case)
                g = read_safetensors(os.path.join(mdir, "golden.safetensors"))
                utts = sorted(int(f[3:-4]) for f in os.listdir(mdir) if f.startswith("utt") and f.endswith(".npy"))
                d = Daemon(mdir, "batching:\n  max_delay_us: 50000\n  delay_when_idle: true\n")
                try:
                    import threading
                    res = {}

                    def one(b):
                        with open(os.path.join(mdir, "utt%d.npy" % b), "rb") as f:
                            res[b] = d.transcribe(f.read(), "application/x-npy")

                    ts = [threading.Thread(target=one, args=(b,)) for b in utts]
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join(60 * SLOW)
                    for b in utts:
                        st, _, doc = res[b]
                        if g["utt%d.features" % b][1][0] == 0:
                            # Zero frames: refused over HTTP (the engine's answer, no tokens, is
                            # checked by the engine tests).
                            self.assertEqual((st, doc["error"]["code"]), (422, "empty_utterance"), doc)
                            continue
                        self.assertEqual(st, 200, doc)
                        self.assertEqual([t["id"] for t in doc["tokens"]], g["utt%d.tokens" % b][2], "utt%d" % b)
                        self.assertEqual([t["frame"] for t in doc["tokens"]], g["utt%d.frames" % b][2], "utt%d" % b)
                        self.assertEqual(doc["frames"], g["utt%d.features" % b][1][0])
                    self.assertGreater(max(res[b][2].get("batch_size", 0) for b in utts), 1)
                    self.assertEqual(d.stop(), 0)
                finally:
                    d.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
