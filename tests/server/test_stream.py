"""GET /v1/stream: WebSocket streams against the real daemon.

Finals equal whole-utterance transcripts (the shipped samples as 16-bit PCM, float PCM and features,
in random chunk sizes, several streams at once); protocol errors (binary before the config, a wrong
encoding or rate, an oversized message, unmasked frames, invalid UTF-8, a half sample) get a JSON
error and the right close code; fragmented messages and ping/pong work; clients that vanish and
1,000 streams opened and abandoned leak nothing (streams_open back to 0, RSS bounded) and leave
other streams unaffected; max_streams gives 503 before the upgrade; the idle timeout closes with
1008; SIGTERM gives every open stream its final and a 1001 close; after SIGHUP open streams finish
on the model they started with.

Needs the python3-websockets package (deploy/install-deps.sh --test); when the interpreter CMake found
lacks it, the test re-runs itself with /usr/bin/python3 (Debian's)."""
import importlib.util
import os
import sys

if importlib.util.find_spec("websockets") is None:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("test_stream.py needs the websockets module: apt-get install python3-websockets (deploy/install-deps.sh --test)")

import asyncio
import base64
import json
import random
import signal
import socket
import struct
import tempfile
import time
import unittest
import wave

import websockets

from harness import MODEL, RELOAD_FROM, RELOAD_TO, SLOW, Daemon, model_info, npy_bytes, random_features, read_npy

SHIPPED = os.environ.get("RNNTD_SHIPPED", os.path.join(os.path.dirname(__file__), "..", "..", "models", "en-char-small"))
SAMPLES = ["01-flite-kal16", "02-espeak-en-gb-x-rp-klatt", "03-festival-kal-diphone", "04-flite-rms"]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120 * SLOW))


def wav_pcm(path):
    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        return w.readframes(w.getnframes()), w.getframerate()


def url(d):
    return "ws://127.0.0.1:%d/v1/stream" % d.port


async def stream(d, chunks, encoding="pcm_s16le", rate=16000, partials=True, endpointing=False, pace=0.0, eof=True):
    """Streams the chunks; returns (ready, partials, finals, errors, close code)."""
    async with websockets.connect(url(d), max_size=None, ping_interval=None) as ws:
        await ws.send(json.dumps({"type": "config", "encoding": encoding, "sample_rate": rate, "partials": partials,
                                  "endpointing": endpointing}))
        ready = json.loads(await ws.recv())
        got = {"partial": [], "final": [], "error": []}

        async def reader():
            async for m in ws:
                doc = json.loads(m)
                got[doc["type"]].append(doc)

        t = asyncio.ensure_future(reader())
        for c in chunks:
            await ws.send(c)
            if pace:
                await asyncio.sleep(pace)
        if eof:
            await ws.send(json.dumps({"type": "eof"}))
        await t
        return ready, got["partial"], got["final"], got["error"], ws.close_code


def random_chunks(data, unit, lo, hi, rng):
    out, i = [], 0
    while i < len(data):
        n = rng.randint(lo, hi) * unit
        out.append(data[i:i + n])
        i += n
    return out


# ---- a raw WebSocket client for what websockets will not send ----

def raw_connect(d, key=None, extra=b""):
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10 * SLOW)
    key = key or base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode() + extra)
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head


def frame(opcode, payload, fin=True, mask=True, rsv=0):
    b0 = (0x80 if fin else 0) | rsv | opcode
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        h = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        h = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        h = struct.pack("!BBQ", b0, mbit | 127, n)
    if not mask:
        return h + payload
    k = os.urandom(4)
    return h + k + bytes(c ^ k[i & 3] for i, c in enumerate(payload))


def read_frames(s, timeout=10):
    """Frames until the server closes: [(opcode, payload)]."""
    s.settimeout(timeout * SLOW)
    buf = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            buf += b
    except (socket.timeout, ConnectionResetError):
        pass
    out, i = [], 0
    while i + 2 <= len(buf):
        op, n = buf[i] & 15, buf[i + 1] & 127
        i += 2
        if n == 126:
            n = struct.unpack("!H", buf[i:i + 2])[0]
            i += 2
        elif n == 127:
            n = struct.unpack("!Q", buf[i:i + 8])[0]
            i += 8
        out.append((op, buf[i:i + n]))
        i += n
    return out


def close_code(frames):
    for op, p in frames:
        if op == 8:
            return struct.unpack("!H", p[:2])[0] if len(p) >= 2 else 1005
    return None


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_streams_open(d, n, timeout=10):
    end = time.monotonic() + timeout * SLOW
    while time.monotonic() < end:
        if d.metrics()["rnntd_streams_open"] == n:
            return True
        time.sleep(0.05)
    return False


@unittest.skipUnless(os.path.isdir(SHIPPED), "no shipped model")
class Transcripts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(model=SHIPPED, config="streaming:\n  tick_ms: 10\n")
        try:
            cls.whole, cls.whole_words = {}, {}
            for name in SAMPLES:
                with open(os.path.join(SHIPPED, "samples", name + ".npy"), "rb") as f:
                    st, _, doc = cls.d.transcribe(f.read(), "application/x-npy")
                assert st == 200, doc
                cls.whole[name] = doc["text"]
                cls.whole_words[name] = doc.get("words")
        except BaseException:
            # unittest skips tearDownClass when setUpClass fails: stop the daemon here, or it outlives the test
            cls.d.stop()
            cls.d.close()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.d.stop() == 0, cls.d.log()
        finally:
            cls.d.close()

    def test_audio_and_features_in_random_chunks(self):
        rng = random.Random(int(os.environ.get("RNNT_TEST_SEED", time.time())))
        jobs = []
        for name in SAMPLES:
            pcm, rate = wav_pcm(os.path.join(SHIPPED, "samples", name + ".wav"))
            jobs.append((name, "pcm_s16le", random_chunks(pcm, 2, 1, 4000, rng), rate))
            f32 = struct.pack("<%df" % (len(pcm) // 2), *(v / 32768.0 for v in struct.unpack("<%dh" % (len(pcm) // 2), pcm)))
            jobs.append((name, "f32le", random_chunks(f32, 4, 1, 4000, rng), rate))
            rows, dim, vals = read_npy(os.path.join(SHIPPED, "samples", name + ".npy"))
            feats = struct.pack("<%df" % len(vals), *vals)
            jobs.append((name, "features", random_chunks(feats, 4 * dim, 1, 40, rng), rate))

        async def all_streams():
            return await asyncio.gather(*(stream(self.d, c, enc, rate, pace=0.02) for _, enc, c, rate in jobs))

        results = run(all_streams())
        for (name, enc, _, _), (ready, parts, finals, errors, code) in zip(jobs, results):
            with self.subTest(sample=name, encoding=enc):
                self.assertEqual(ready["type"], "ready")
                self.assertEqual(errors, [])
                self.assertEqual(code, 1000)
                self.assertEqual(len(finals), 1)
                self.assertEqual(finals[0]["text"], self.whole[name])
                self.assertTrue(finals[0]["last"])
                words = [w["word"] for w in finals[0]["words"]]
                self.assertEqual(" ".join(words), self.whole[name])
                # Word confidence as the whole utterance's (the joint's softmax of the emitted tokens; the
                # audio path's features differ from the .npy ones in rounding only), and the segment's.
                self.assertTrue(all(0 < w["confidence"] <= 1 and w["start"] <= w["end"] for w in finals[0]["words"]), finals[0])
                self.assertTrue(0 < finals[0]["confidence"] <= 1, finals[0])
                if self.whole_words.get(name) and None not in [w["confidence"] for w in self.whole_words[name]]:
                    ref = [w["confidence"] for w in self.whole_words[name]]
                    got = [w["confidence"] for w in finals[0]["words"]]
                    self.assertEqual(len(ref), len(got))
                    self.assertLess(max(abs(a - b) for a, b in zip(ref, got)), 0.02, (ref, got))
                # Partials grow and are prefixes of the final text.
                texts = [p["text"] for p in parts]
                self.assertGreater(len(texts), 1)
                for a, b in zip(texts, texts[1:]):
                    self.assertTrue(b.startswith(a) or len(b) >= len(a), (a, b))
                self.assertTrue(all(self.whole[name].startswith(t.rstrip()) or t == "" for t in texts), texts)
        self.assertTrue(wait_streams_open(self.d, 0))
        m = self.d.metrics()
        self.assertGreaterEqual(m['rnntd_streams_total{outcome="finished"}'], len(jobs))
        self.assertGreater(m["rnntd_stream_partial_latency_seconds_count"], 0)
        self.assertGreater(m["rnntd_stream_real_time_factor_count"], 0)

    def test_partials_off_and_endpointing(self):
        pcm, rate = wav_pcm(os.path.join(SHIPPED, "samples", SAMPLES[0] + ".wav"))
        silence = b"\0\0" * (rate * 2)  # 2 s: more than endpoint_silence_ms (1.2 s)
        chunks = random_chunks(pcm + silence + pcm, 2, 1000, 3000, random.Random(1))
        ready, parts, finals, errors, code = run(stream(self.d, chunks, partials=False, endpointing=True))
        self.assertEqual((parts, errors, code), ([], [], 1000))
        self.assertTrue(ready["endpointing"])
        self.assertEqual([f["segment"] for f in finals], list(range(len(finals))))
        self.assertGreaterEqual(len(finals), 2, finals)
        self.assertEqual(finals[0]["text"], self.whole[SAMPLES[0]])
        self.assertFalse(finals[0]["last"])
        self.assertTrue(finals[-1]["last"])
        self.assertLessEqual(finals[0]["end"], finals[1]["start"] + 1e-9)


@unittest.skipUnless(MODEL and os.path.isdir(MODEL), "no test model")
class Protocol(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(config="streaming:\n  max_message_bytes: 4096\n  max_streams: 1100\n")
        cls.dim = model_info(MODEL)["feature_dim"]
        cls.rate = model_info(MODEL)["sample_rate"]

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.d.stop() == 0, cls.d.log()
        finally:
            cls.d.close()

    def config(self, **kw):
        doc = {"type": "config", "encoding": "features"}
        doc.update(kw)
        return frame(1, json.dumps(doc).encode())

    def expect_error(self, frames, code, close):
        texts = [json.loads(p) for op, p in frames if op == 1]
        errs = [t for t in texts if t["type"] == "error"]
        self.assertTrue(errs, frames)
        self.assertEqual(errs[-1]["error"]["code"], code)
        self.assertTrue(errs[-1]["error"]["message"])
        self.assertEqual(close_code(frames), close)

    def test_handshake(self):
        s, head = raw_connect(self.d, key="dGhlIHNhbXBsZSBub25jZQ==")
        s.close()
        self.assertIn(b"101 Switching Protocols", head)
        self.assertIn(b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", head)  # RFC 6455 section 1.3
        st, hd, body = self.d.request("GET", "/v1/stream")
        self.assertEqual(st, 400)
        self.assertEqual(json.loads(body)["error"]["code"], "bad_upgrade")
        st, hd, body = self.d.request("GET", "/v1/stream", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                                                    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                                                    "Sec-WebSocket-Version": "8"})
        self.assertEqual((st, hd.get("sec-websocket-version")), (426, "13"))
        st, _, body = self.d.request("GET", "/v1/stream", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                                                   "Sec-WebSocket-Key": "short", "Sec-WebSocket-Version": "13"})
        self.assertEqual(st, 400)
        for method in ("POST", "TRACE", "PUT"):  # not a handshake at all: 405, as for any other endpoint
            st, hd, body = self.d.request(method, "/v1/stream")
            self.assertEqual((st, hd.get("allow"), json.loads(body)["error"]["code"]), (405, "GET", "method_not_allowed"))

    def test_binary_before_config(self):
        s, _ = raw_connect(self.d)
        s.sendall(frame(2, b"\0" * 64))
        self.expect_error(read_frames(s), "config_first", 1008)
        s.close()

    def test_bad_configs(self):
        cases = [({"encoding": "mp3"}, "unsupported_encoding", 1003),
                 ({"encoding": "pcm_s16le", "sample_rate": 44100}, "unsupported_sample_rate", 1003),
                 ({"encoding": "features", "partials": "yes"}, "invalid_config", 1007),
                 ({"encoding": "features", "colour": 1}, "invalid_config", 1007)]
        for cfg, code, close in cases:
            with self.subTest(cfg=cfg):
                s, _ = raw_connect(self.d)
                s.sendall(frame(1, json.dumps(cfg).encode()))
                self.expect_error(read_frames(s), code, close)
                s.close()
        s, _ = raw_connect(self.d)
        s.sendall(frame(1, b"not json"))
        self.expect_error(read_frames(s), "invalid_config", 1007)
        s.close()

    def test_oversized_unmasked_utf8_half_frame(self):
        s, _ = raw_connect(self.d)
        s.sendall(self.config() + frame(2, b"\0" * 5000))
        self.expect_error(read_frames(s), "message_too_big", 1009)
        s.close()
        s, _ = raw_connect(self.d)
        s.sendall(frame(1, b'{"encoding":"features"}', mask=False))
        self.expect_error(read_frames(s), "protocol_error", 1002)
        s.close()
        s, _ = raw_connect(self.d)
        s.sendall(frame(1, b'{"encoding":"\xff"}'))
        self.expect_error(read_frames(s), "invalid_utf8", 1007)
        s.close()
        s, _ = raw_connect(self.d)
        s.sendall(frame(1, b"x", rsv=0x40))
        self.expect_error(read_frames(s), "protocol_error", 1002)
        s.close()
        s, _ = raw_connect(self.d)
        s.sendall(self.config() + frame(2, b"\0" * (4 * self.dim + 4)))
        self.expect_error(read_frames(s), "partial_sample", 1007)
        s.close()
        s, _ = raw_connect(self.d)
        s.sendall(self.config() + frame(2, struct.pack("<%df" % self.dim, *([float("nan")] * self.dim))))
        self.expect_error(read_frames(s), "invalid_input", 1007)
        s.close()

    def test_fragments_and_ping(self):
        vals = random_features(30, self.dim, 5)
        feats = struct.pack("<%df" % len(vals), *vals)
        cfg = json.dumps({"type": "config", "encoding": "features"}).encode()
        s, _ = raw_connect(self.d)
        # The config in three fragments with a ping between them; the features in two fragments.
        s.sendall(frame(1, cfg[:5], fin=False) + frame(9, b"hi") + frame(0, cfg[5:9], fin=False) + frame(0, cfg[9:]))
        half = len(feats) // (8 * self.dim) * 4 * self.dim
        s.sendall(frame(2, feats[:half], fin=False) + frame(0, feats[half:]) + frame(1, b'{"type":"eof"}'))
        fr = read_frames(s)
        s.close()
        self.assertIn((10, b"hi"), fr)
        docs = [json.loads(p) for op, p in fr if op == 1]
        self.assertEqual(docs[0]["type"], "ready")
        finals = [x for x in docs if x["type"] == "final"]
        self.assertEqual(len(finals), 1)
        st, _, whole = self.d.transcribe(npy_bytes(30, self.dim, vals), "application/x-npy")
        self.assertEqual(finals[0]["text"], whole["text"])
        self.assertEqual(close_code(fr), 1000)
        # Protocol violations around fragments: a continuation with nothing begun, a fragmented ping,
        # a new message inside a fragmented one.
        for bad in (frame(0, b"x"), frame(9, b"x", fin=False), frame(1, b"{", fin=False) + frame(1, b"}")):
            s, _ = raw_connect(self.d)
            s.sendall(bad)
            self.expect_error(read_frames(s), "protocol_error", 1002)
            s.close()

    def test_vanishing_and_abandoned_streams_leak_nothing(self):
        vals = random_features(40, self.dim, 3)
        feats = struct.pack("<%df" % len(vals), *vals)
        st, _, whole = self.d.transcribe(npy_bytes(40, self.dim, vals), "application/x-npy")
        rss0 = rss_kib(self.d.proc.pid)

        async def good_stream():
            return await stream(self.d, [feats[i:i + 4 * self.dim * 3] for i in range(0, len(feats), 4 * self.dim * 3)],
                                "features", pace=0.01)

        async def abandon(n):
            loop = asyncio.get_running_loop()
            done = 0
            for k in range(0, n, 100):
                socks = []
                for _ in range(min(100, n - k)):
                    s, head = await loop.run_in_executor(None, raw_connect, self.d)
                    assert b"101" in head, head
                    s.sendall(self.config() + frame(2, feats[:4 * self.dim * 5]))
                    socks.append(s)
                for i, s in enumerate(socks):
                    if i % 2:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
                    s.close()
                    done += 1
            return done

        async def both():
            return await asyncio.gather(abandon(1000), good_stream(), good_stream())

        n, g1, g2 = run(both())
        self.assertEqual(n, 1000)
        for g in (g1, g2):
            self.assertEqual((g[2][0]["text"], g[3], g[4]), (whole["text"], [], 1000))
        self.assertTrue(wait_streams_open(self.d, 0, 20), self.d.metrics()["rnntd_streams_open"])
        rss1 = rss_kib(self.d.proc.pid)
        self.assertLess(rss1 - rss0, 64 * 1024, (rss0, rss1))  # 1,000 streams did not stay behind

    def test_max_streams_and_idle(self):
        d = Daemon(config="streaming:\n  max_streams: 2\n  idle_timeout_s: 1\n")
        try:
            a, ha = raw_connect(d)
            b, hb = raw_connect(d)
            self.assertIn(b" 101 ", ha)
            self.assertIn(b" 101 ", hb)
            st, hd, body = d.request("GET", "/v1/stream", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                                                   "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                                                   "Sec-WebSocket-Version": "13"})
            self.assertEqual((st, json.loads(body)["error"]["code"]), (503, "too_many_streams"))
            self.assertIn("retry-after", hd)
            t0 = time.monotonic()
            self.expect_error(read_frames(a, 10), "idle_timeout", 1008)
            self.assertLess(time.monotonic() - t0, 5 * SLOW)
            a.close()
            b.close()
            self.assertTrue(wait_streams_open(d, 0))
            self.assertEqual(d.stop(), 0)
        finally:
            d.close()


@unittest.skipUnless(MODEL and os.path.isdir(MODEL), "no test model")
class Lifecycle(unittest.TestCase):
    def test_sigterm_finishes_open_streams(self):
        d = Daemon(config="server:\n  drain_timeout_s: 20\n")
        dim = model_info(MODEL)["feature_dim"]
        try:
            vals = random_features(50, dim, 7)
            feats = struct.pack("<%df" % len(vals), *vals)
            socks = []
            for _ in range(3):
                s, head = raw_connect(d)
                self.assertIn(b" 101 ", head)
                s.sendall(frame(1, b'{"type":"config","encoding":"features"}') + frame(2, feats))
                socks.append(s)
            self.assertTrue(wait_streams_open(d, 3))
            time.sleep(0.2 * SLOW)
            d.send_signal(signal.SIGTERM)
            # The input ends with the drain: each stream gets its final and a 1001 close.
            for s in socks:
                fr = read_frames(s, 20)
                docs = [json.loads(p) for op, p in fr if op == 1]
                finals = [x for x in docs if x["type"] == "final"]
                self.assertEqual(len(finals), 1, docs)
                self.assertTrue(finals[0]["last"])
                self.assertEqual(close_code(fr), 1001)
                s.close()
            self.assertEqual(d.stop(timeout=30), 0)
            self.assertNotIn("drain timeout", d.log())
        finally:
            d.close()

    def test_sighup_streams_finish_on_their_model(self):
        if not (os.path.isdir(RELOAD_FROM) and os.path.isdir(RELOAD_TO)):
            self.skipTest("no models to reload between")
        M1, M2 = RELOAD_FROM, RELOAD_TO
        i1, i2 = model_info(M1), model_info(M2)
        dim = i1["feature_dim"]
        vals = random_features(60, dim, 11)
        feats = struct.pack("<%df" % len(vals), *vals)
        body = npy_bytes(60, dim, vals)
        ref = {}
        for m in (M1, M2):
            d = Daemon(model=m)
            try:
                ref[m] = d.transcribe(body, "application/x-npy")[2]["text"]
                d.stop()
            finally:
                d.close()
        d = Daemon(model=False, config='model:\n  path: "%s"\n' % M1)
        try:
            s, _ = raw_connect(d)
            s.sendall(frame(1, b'{"type":"config","encoding":"features"}') + frame(2, feats[:len(feats) // 2]))
            time.sleep(0.2 * SLOW)
            d.write_config('model:\n  path: "%s"\n' % M2)
            d.send_signal(signal.SIGHUP)
            end = time.monotonic() + 20 * SLOW
            while json.loads(d.request("GET", "/health")[2])["model"]["name"] != i2["name"] and time.monotonic() < end:
                time.sleep(0.05)
            s2, _ = raw_connect(d)
            s2.sendall(frame(1, b'{"type":"config","encoding":"features"}') + frame(2, feats) + frame(1, b'{"type":"eof"}'))
            s.sendall(frame(2, feats[len(feats) // 2:]) + frame(1, b'{"type":"eof"}'))
            for sock, model, info in ((s, M1, i1), (s2, M2, i2)):
                docs = [json.loads(p) for op, p in read_frames(sock, 20) if op == 1]
                self.assertEqual(docs[0]["model"], info["name"])
                finals = [x for x in docs if x["type"] == "final"]
                self.assertEqual(finals[0]["text"], ref[model])
                sock.close()
            self.assertNotEqual(ref[M1], ref[M2])
            self.assertEqual(d.stop(), 0)
        finally:
            d.close()


if __name__ == "__main__":
    unittest.main()
