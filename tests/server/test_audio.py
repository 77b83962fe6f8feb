"""Audio over HTTP (issue 12 section 3): audio bodies on POST /v1/transcribe, the OpenAI-compatible
POST /v1/audio/transcriptions (strict multipart/form-data, every response_format, the official
`openai` client and curl -F), word times and confidence, KServe v2 health aliases, and hostile audio
and forms: each gets its 4xx JSON error, the daemon keeps serving, and at the end exits 0 with nothing
held (under ASan: no leak, no error). The shipped model decodes the shipped sample WAVs; its CLI gives
the reference transcripts."""
import io
import json
import os
import random
import re
import shutil
import struct
import subprocess
import unittest
import wave

import yaml

from harness import CLI, SLOW, Daemon, cli_transcripts, readb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = os.path.join(ROOT, "models", "en-char-small")
SAMPLES = sorted(os.path.join(SHIPPED, "samples", f) for f in os.listdir(os.path.join(SHIPPED, "samples"))
                 if f.endswith(".wav")) if os.path.isdir(SHIPPED) else []
# The PyPI tools' environment of deploy/install-deps.sh --test (the openai client lives there).
PYENV = os.environ.get("RNNTD_PYENV") or os.path.join(
    os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"), "rnntd", "pyenv")


def wav_bytes(samples, rate=16000, channels=1):
    b = io.BytesIO()
    with wave.open(b, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(struct.pack("<%dh" % len(samples), *samples))
    return b.getvalue()


def wav_samples(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        n = w.getnframes()
        return list(struct.unpack("<%dh" % n, w.readframes(n))), w.getframerate()


def sndfile_encode(samples, rate, kind):
    """FLAC, Ogg Vorbis or MP3 bytes of int16 mono samples, through libsndfile (ctypes); None without it."""
    import ctypes
    import ctypes.util
    import tempfile
    name = ctypes.util.find_library("sndfile")
    if not name:
        return None
    lib = ctypes.CDLL(name)

    class SF_INFO(ctypes.Structure):
        _fields_ = [("frames", ctypes.c_int64), ("samplerate", ctypes.c_int), ("channels", ctypes.c_int),
                    ("format", ctypes.c_int), ("sections", ctypes.c_int), ("seekable", ctypes.c_int)]
    lib.sf_open.restype = ctypes.c_void_p
    lib.sf_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(SF_INFO)]
    lib.sf_write_short.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_short), ctypes.c_int64]
    lib.sf_write_short.restype = ctypes.c_int64
    lib.sf_close.argtypes = [ctypes.c_void_p]
    fmt = {"flac": 0x170000 | 0x0002, "ogg": 0x200000 | 0x0060, "mp3": 0x230000 | 0x0082}[kind]  # sndfile.h
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "a." + kind)
        info = SF_INFO(0, rate, 1, fmt, 0, 0)
        f = lib.sf_open(path.encode(), 0x20, ctypes.byref(info))  # SFM_WRITE
        if not f:
            return None
        lib.sf_write_short(f, (ctypes.c_short * len(samples))(*samples), len(samples))
        lib.sf_close(f)
        return readb(path)


def multipart(fields, files, boundary="rnntd-test-boundary-7f3a"):
    """A multipart/form-data body: fields [(name, value)], files [(name, filename, bytes)]."""
    out = b""
    for name, value in fields:
        out += b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (
            boundary.encode(), name.encode(), value.encode())
    for name, filename, data in files:
        out += (b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                b"Content-Type: application/octet-stream\r\n\r\n" % (boundary.encode(), name.encode(), filename.encode()))
        out += data + b"\r\n"
    out += b"--%s--\r\n" % boundary.encode()
    return out, "multipart/form-data; boundary=" + boundary


@unittest.skipUnless(SAMPLES, "no shipped model with sample WAVs")
class Audio(unittest.TestCase):
    config = ("server:\n  connection_timeout_s: 5\n  request_timeout_s: 10\n"
              "limits:\n  max_body_bytes: 4194304\n  max_audio_s: 30\n")

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(SHIPPED, cls.config)
        cls.ref = cli_transcripts(SHIPPED, SAMPLES)
        cls.wavs = {p: readb(p) for p in SAMPLES}

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.stop_clean()
        finally:
            cls.d.close()

    def tearDown(self):
        # Whatever a test sent, nothing stays held and a normal client is served.
        m = self.d.settled_metrics()
        self.assertEqual(m.get("rnntd_pending_bytes", 0), 0)
        st, _, doc = self.post("/v1/transcribe", self.wavs[SAMPLES[0]], "audio/wav")
        self.assertEqual(st, 200, doc)

    def post(self, path, body, ctype, query=""):
        st, hd, data = self.d.request("POST", path + query, body, {"Content-Type": ctype}, timeout=30)
        if hd.get("content-type", "").startswith("application/json"):
            return st, hd, json.loads(data)
        return st, hd, data.decode()

    def error(self, st, hd, doc, status, code):
        self.assertEqual(st, status, doc)
        self.assertTrue(hd.get("content-type", "").startswith("application/json"))
        self.assertEqual(set(doc), {"error"}, doc)
        self.assertEqual(doc["error"]["code"], code, doc)
        self.assertTrue(doc["error"]["message"])
        return doc["error"]["message"]

    # ------------------------------------------------------------ POST /v1/transcribe with audio

    def test_audio_bodies_match_the_cli(self):
        for path, body in self.wavs.items():
            for ctype in ("audio/wav", "audio/x-wav", "audio/wave", "application/octet-stream"):
                with self.subTest(file=os.path.basename(path), ctype=ctype):
                    st, _, doc = self.post("/v1/transcribe", body, ctype)
                    self.assertEqual(st, 200, doc)
                    self.assertEqual(doc["text"], self.ref[path]["text"])
                    self.assertEqual([t["id"] for t in doc["tokens"]], [t["id"] for t in self.ref[path]["tokens"]])
                    self.assertAlmostEqual(doc["duration_s"], len(body[44:]) / 2 / 16000, places=3)
            # The same utterance's .npy features, under octet-stream too (told apart by magic).
            st, _, doc = self.post("/v1/transcribe", readb(path[:-4] + ".npy"), "application/octet-stream")
            self.assertEqual((st, doc["text"]), (200, self.ref[path]["text"]))

    def test_formats_and_rates(self):
        """FLAC gives the WAV's tokens exactly; Ogg Vorbis and MP3 (lossy) and a 44.1 kHz stereo WAV
        (mixed and resampled) the same transcript; over both endpoints."""
        path = SAMPLES[1]
        x, rate = wav_samples(path)
        text, ids = self.ref[path]["text"], [t["id"] for t in self.ref[path]["tokens"]]
        bodies = []
        for kind, ctype in (("flac", "audio/flac"), ("ogg", "audio/ogg"), ("mp3", "audio/mpeg")):
            b = sndfile_encode(x, rate, kind)
            if b is None:
                self.skipTest("libsndfile cannot write %s here" % kind)
            bodies.append((kind, ctype, b))
        up = [x[min(len(x) - 1, i * 16000 // 44100)] for i in range(len(x) * 44100 // 16000)]
        bodies.append(("44.1 kHz stereo", "audio/wav", wav_bytes([v for v in up for _ in (0, 1)], 44100, 2)))
        for kind, ctype, b in bodies:
            with self.subTest(kind=kind):
                st, _, doc = self.post("/v1/transcribe", b, ctype)
                self.assertEqual((st, doc.get("text")), (200, text), doc)
                if kind == "flac":
                    self.assertEqual([t["id"] for t in doc["tokens"]], ids)
                st, _, doc = self.post("/v1/transcribe", b, "application/octet-stream")
                self.assertEqual((st, doc.get("text")), (200, text), doc)
                body, ct = multipart([], [("file", "a." + kind[:4], b)])
                st, _, doc = self.post("/v1/audio/transcriptions", body, ct)
                self.assertEqual((st, doc), (200, {"text": text}))

    def test_words_times_and_confidence(self):
        st, _, doc = self.post("/v1/transcribe", self.wavs[SAMPLES[2]], "audio/wav")
        self.assertEqual(st, 200, doc)
        words = doc["words"]
        self.assertEqual(" ".join(w["word"] for w in words), doc["text"])
        self.assertEqual([(w["word"], w["start"], w["end"]) for w in words],
                         [(w["word"], w["start"], w["end"]) for w in self.ref[SAMPLES[2]]["words"]])
        for a, b in zip(words, words[1:]):
            self.assertLessEqual(a["start"], a["end"])
            self.assertLessEqual(a["end"], b["start"] + 1e-9)
        for w in words:
            self.assertGreater(w["confidence"], 0.0)
            self.assertLessEqual(w["confidence"], 1.0)
        st, _, doc = self.post("/v1/transcribe", self.wavs[SAMPLES[2]], "audio/wav", "?timestamps=false")
        self.assertNotIn("words", doc)

    def test_confidence_drops_in_noise(self):
        """The same sample drowned in white noise: its words are less sure (the mean of its words'
        confidences, an empty transcript counting as 0)."""
        rnd = random.Random(5)
        for path in SAMPLES:
            x, rate = wav_samples(path)
            peak = max(abs(v) for v in x)
            noisy = [max(-32768, min(32767, int(v + rnd.gauss(0, 0.7 * peak)))) for v in x]
            conf = []
            for body in (self.wavs[path], wav_bytes(noisy, rate)):
                st, _, doc = self.post("/v1/transcribe", body, "audio/wav")
                self.assertEqual(st, 200, doc)
                cs = [w["confidence"] for w in doc["words"]]
                conf.append(sum(cs) / len(cs) if cs else 0.0)
            with self.subTest(file=os.path.basename(path), clean=conf[0], noisy=conf[1]):
                self.assertGreater(conf[0], 0.85)
                self.assertGreater(conf[0], conf[1] + 0.1)

    def test_hostile_audio(self):
        w = self.wavs[SAMPLES[0]]
        def patched(off, fmt, value, body=w):
            b = bytearray(body)
            struct.pack_into(fmt, b, off, value)
            return bytes(b)
        cases = [
            ("truncated RIFF", w[:30], "audio/wav", 400, "invalid_audio"),
            ("0 channels", patched(22, "<H", 0), "audio/wav", 400, "invalid_audio"),
            ("1000 channels", patched(22, "<H", 1000), "audio/wav", 400, "invalid_audio"),
            ("1 Hz", patched(24, "<I", 1), "audio/wav", 400, "invalid_audio"),
            ("2 GHz", patched(24, "<I", 2000000000), "audio/wav", 400, "invalid_audio"),
            ("zero samples", wav_bytes([]), "audio/wav", 422, "empty_utterance"),
            ("header only", w[:44], "audio/wav", 422, "empty_utterance"),
            ("empty body", b"", "audio/wav", 422, "empty_utterance"),
            ("text as audio/wav", b"hello, this is not audio at all, just some text" * 3, "audio/wav", 415, "unsupported_audio"),
            ("text as audio/flac", b"\x00" * 200, "audio/flac", 415, "unsupported_audio"),
            ("text as octet-stream", b"hello there" * 10, "application/octet-stream", 415, "unsupported_media_type"),
            ("a few samples", wav_bytes([0, 1, -1]), "audio/wav", 422, "empty_utterance"),
            ("31 s > max_audio_s", wav_bytes([0] * (16000 * 31)), "audio/wav", 413, "audio_too_long"),
        ]
        # A FLAC STREAMINFO claiming 10 hours, and nothing after it: refused from the header.
        total = 10 * 3600 * 16000
        si = struct.pack(">HH", 4096, 4096) + b"\x00\x00\x00" * 2
        si += ((16000 << 44) | (0 << 41) | (15 << 36) | total).to_bytes(8, "big") + b"\x00" * 16
        cases.append(("FLAC header claiming 10 h", b"fLaC" + bytes([0x80, 0, 0, 34]) + si + b"\x00" * 64, "audio/flac",
                      413, "audio_too_long"))
        for name, body, ctype, status, code in cases:
            with self.subTest(case=name):
                st, hd, doc = self.post("/v1/transcribe", body, ctype)
                self.error(st, hd, doc, status, code)
        # Sizes that lie (data and RIFF sizes past the end; a byte rate that claims hours): only
        # what is there is decoded, or a 4xx; never a 5xx or a hang.
        for name, body in (("data size lies", patched(40, "<I", 0x7FFFFFF0, patched(4, "<I", 0x7FFFFFF0))),
                           ("hours in 100 bytes", patched(40, "<I", 0x7FFFFFF0, w[:100]))):
            with self.subTest(case=name):
                st, hd, doc = self.post("/v1/transcribe", body, "audio/wav")
                self.assertIn(st, (200, 400, 413, 422), doc)
                if st == 200:
                    self.assertLessEqual(doc["duration_s"], len(body) / 32000 + 0.01)

    # ------------------------------------------------------------ POST /v1/audio/transcriptions

    def oai(self, fields=(), files=None, body=None, ctype=None):
        if body is None:
            body, ctype = multipart(list(fields), [("file", "sample.wav", self.wavs[SAMPLES[0]])] if files is None else files)
        return self.post("/v1/audio/transcriptions", body, ctype)

    def test_openai_formats(self):
        text = self.ref[SAMPLES[0]]["text"]
        st, hd, doc = self.oai([("model", "whisper-1")])
        self.assertEqual((st, doc), (200, {"text": text}))
        st, hd, doc = self.oai([("model", "en-char-small"), ("language", "en"), ("prompt", "ignored"),
                                ("temperature", "0.2"), ("response_format", "json")])
        self.assertEqual((st, doc), (200, {"text": text}))
        st, hd, body = self.oai([("response_format", "text")])
        self.assertEqual((st, body), (200, text + "\n"))
        self.assertTrue(hd["content-type"].startswith("text/plain"))
        st, hd, body = self.oai([("response_format", "srt")])
        self.assertEqual(st, 200)
        self.assertRegex(body, r"^1\n00:00:\d\d,\d\d\d --> 00:00:\d\d,\d\d\d\n" + text + "\n")
        st, hd, body = self.oai([("response_format", "vtt")])
        self.assertEqual(st, 200)
        self.assertTrue(body.startswith("WEBVTT\n"), body)
        self.assertIn(text, body)
        st, hd, doc = self.oai([("response_format", "verbose_json"), ("timestamp_granularities[]", "word"),
                                ("timestamp_granularities[]", "segment")])
        self.assertEqual(st, 200, doc)
        self.assertEqual(set(doc), {"task", "language", "duration", "text", "words", "segments"})
        self.assertEqual((doc["task"], doc["language"], doc["text"]), ("transcribe", "english", text))
        self.assertAlmostEqual(doc["duration"], (len(self.wavs[SAMPLES[0]]) - 44) / 32000, places=3)
        self.assertEqual([w["word"] for w in doc["words"]], text.split())
        for w in doc["words"]:
            self.assertEqual(set(w), {"word", "start", "end", "confidence"})
        seg = doc["segments"][0]
        self.assertEqual(set(seg), {"id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob",
                                    "compression_ratio", "no_speech_prob"})
        self.assertEqual(" ".join(s["text"] for s in doc["segments"]), text)
        self.assertLess(seg["avg_logprob"], 0.0)
        # verbose_json without granularities: segments only (as OpenAI); word only: words only.
        st, _, doc = self.oai([("response_format", "verbose_json")])
        self.assertEqual((st, "segments" in doc, "words" in doc), (200, True, False))
        st, _, doc = self.oai([("response_format", "verbose_json"), ("timestamp_granularities[]", "word")])
        self.assertEqual((st, "segments" in doc, "words" in doc), (200, False, True))

    def test_openai_bad_forms(self):
        wav = self.wavs[SAMPLES[0]]
        b = "rnntd-test-boundary-7f3a"
        cases = [
            ("no file", multipart([("model", "whisper-1")], []), 400, "missing_file"),
            ("two files", multipart([], [("file", "a.wav", wav), ("file", "b.wav", wav)]), 400, "multiple_files"),
            ("a file elsewhere", multipart([], [("file", "a.wav", wav), ("audio", "b.wav", wav)]), 400, "unexpected_file"),
            ("boundary never ends", (multipart([], [("file", "a.wav", wav)])[0][:-len(b) - 8], "multipart/form-data; boundary=" + b),
             400, "invalid_multipart"),
            ("no closing delimiter", (b"--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n" % b.encode() + wav,
                                      "multipart/form-data; boundary=" + b), 400, "invalid_multipart"),
            ("no boundary parameter", (b"x", "multipart/form-data"), 400, "invalid_multipart"),
            ("boundary of 71 chars", (b"x", "multipart/form-data; boundary=" + "a" * 71), 400, "invalid_multipart"),
            ("bare LF headers", (b"--%s\nContent-Disposition: form-data; name=\"file\"\n\nabc\r\n--%s--\r\n" % (b.encode(), b.encode()),
                                 "multipart/form-data; boundary=" + b), 400, "invalid_multipart"),
            ("no Content-Disposition", (b"--%s\r\nContent-Type: audio/wav\r\n\r\nabc\r\n--%s--\r\n" % (b.encode(), b.encode()),
                                        "multipart/form-data; boundary=" + b), 400, "invalid_multipart"),
            ("not multipart", (wav, "audio/wav"), 415, "unsupported_media_type"),
            ("unknown field", multipart([("stream", "true")], [("file", "a.wav", wav)]), 400, "unknown_field"),
            ("field twice", multipart([("model", "whisper-1"), ("model", "whisper-1")], [("file", "a.wav", wav)]), 400, "invalid_request"),
            ("bad format", multipart([("response_format", "xml")], [("file", "a.wav", wav)]), 400, "invalid_parameter"),
            ("bad granularity", multipart([("response_format", "verbose_json"), ("timestamp_granularities[]", "char")],
                                          [("file", "a.wav", wav)]), 400, "invalid_parameter"),
            ("granularity without verbose_json", multipart([("timestamp_granularities[]", "word")], [("file", "a.wav", wav)]),
             400, "invalid_parameter"),
            ("German", multipart([("language", "de")], [("file", "a.wav", wav)]), 400, "unsupported_language"),
            ("other model", multipart([("model", "gpt-4o-transcribe")], [("file", "a.wav", wav)]), 400, "model_not_found"),
            ("temperature 7", multipart([("temperature", "7")], [("file", "a.wav", wav)]), 400, "invalid_parameter"),
            ("text file", multipart([], [("file", "a.txt", b"not audio at all " * 20)]), 415, "unsupported_audio"),
            ("empty file", multipart([], [("file", "a.wav", b"")]), 422, "empty_utterance"),
            ("truncated file", multipart([], [("file", "a.wav", wav[:30])]), 400, "invalid_audio"),
        ]
        for name, (body, ctype), status, code in cases:
            with self.subTest(case=name):
                st, hd, doc = self.post("/v1/audio/transcriptions", body, ctype)
                self.error(st, hd, doc, status, code)
        st, hd, data = self.d.request("GET", "/v1/audio/transcriptions")
        self.assertEqual(st, 405)

    @unittest.skipUnless(shutil.which("curl"), "no curl")
    def test_curl_form(self):
        url = "http://127.0.0.1:%d/v1/audio/transcriptions" % self.d.port
        for path in SAMPLES:
            out = subprocess.run(["curl", "-sS", "-F", "file=@" + path, "-F", "model=whisper-1", url],
                                 capture_output=True, text=True, timeout=30 * SLOW)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(json.loads(out.stdout), {"text": self.ref[path]["text"]})

    def test_openai_client(self):
        py = os.path.join(PYENV, "bin", "python")
        if not os.path.exists(py) or subprocess.run([py, "-c", "import openai"], capture_output=True).returncode:
            self.skipTest("the openai client is not installed in %s (deploy/install-deps.sh --test)" % PYENV)
        script = r"""
import json, sys
import openai
c = openai.OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
out = {}
with open(sys.argv[2], "rb") as f:
    out["json"] = c.audio.transcriptions.create(model="whisper-1", file=f).text
with open(sys.argv[2], "rb") as f:
    v = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="verbose_json",
                                      timestamp_granularities=["word", "segment"], language="en")
    out["verbose"] = {"text": v.text, "duration": v.duration, "words": [[w.word, w.start, w.end] for w in v.words],
                      "segments": [[s.id, s.start, s.end, s.text] for s in v.segments]}
with open(sys.argv[2], "rb") as f:
    out["srt"] = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="srt")
with open(sys.argv[2], "rb") as f:
    out["text"] = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="text")
try:
    with open(sys.argv[2], "rb") as f:
        c.audio.transcriptions.create(model="whisper-1", file=f, language="fr")
except openai.BadRequestError as e:
    out["error"] = [e.status_code, e.body]
print(json.dumps(out))
"""
        path = SAMPLES[1]
        r = subprocess.run([py, "-c", script, "http://127.0.0.1:%d/v1" % self.d.port, path], capture_output=True,
                           text=True, timeout=60 * SLOW)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        text = self.ref[path]["text"]
        self.assertEqual(out["json"], text)
        self.assertEqual(out["verbose"]["text"], text)
        self.assertEqual([w[0] for w in out["verbose"]["words"]], text.split())
        self.assertEqual(out["verbose"]["segments"][0][3], text)
        self.assertIn(text, out["srt"])
        self.assertEqual(out["text"].strip(), text)
        self.assertEqual(out["error"][0], 400)
        self.assertEqual(out["error"][1]["code"], "unsupported_language")

    def test_openapi_examples_are_valid_requests(self):
        spec = readb(os.path.join(ROOT, "server", "openapi.yaml")).decode()
        doc = yaml.safe_load(spec)
        example = doc["paths"]["/v1/transcribe"]["post"]["requestBody"]["content"]["application/json"]["example"]
        self.assertIs(example["timestamps"], True)
        feats = example["features"]
        self.assertEqual([len(f) for f in feats], [80] * len(feats))
        st, _, doc = self.post("/v1/transcribe", json.dumps({"features": feats, "timestamps": True}).encode(), "application/json")
        self.assertEqual(st, 200, doc)
        ext = re.findall(r"externalValue: '([^']+)'", spec)
        self.assertGreaterEqual(len(ext), 2)
        for path in ext:
            body = readb(os.path.join(ROOT, path))
            st, _, doc = self.post("/v1/transcribe", body, "application/x-npy" if path.endswith(".npy") else "audio/wav")
            self.assertEqual(st, 200, doc)
            self.assertTrue(doc["text"])
        m = re.search(r"value: \{file: '([^']+)', model: ([\w-]+), response_format: (\w+), 'timestamp_granularities\[\]': \[(\w+)\]\}", spec)
        body, ctype = multipart([("model", m.group(2)), ("response_format", m.group(3)), ("timestamp_granularities[]", m.group(4))],
                                [("file", "f.wav", readb(os.path.join(ROOT, m.group(1))))])
        st, _, doc = self.post("/v1/audio/transcriptions", body, ctype)
        self.assertEqual(st, 200, doc)
        self.assertTrue(doc["words"])

    # ------------------------------------------------------------ KServe v2 names

    def test_kserve_v2(self):
        for path, status, want in (("/v2/health/live", 200, {"live": True}), ("/v2/health/ready", 200, {"ready": True}),
                                   ("/v2/models/en-char-small/ready", 200, {"ready": True})):
            st, _, data = self.d.request("GET", path)
            self.assertEqual((st, json.loads(data)), (status, want), path)
        st, _, data = self.d.request("GET", "/v2/models/en-char-small")
        doc = json.loads(data)
        self.assertEqual((st, doc["name"], doc["inputs"][0]["shape"]), (200, "en-char-small", [-1, 80]))
        for path in ("/v2/models/other", "/v2/models/other/ready", "/v2/models/en-char-small/versions/1/infer", "/v2/x"):
            st, hd, data = self.d.request("GET", path)
            self.assertEqual(st, 404, path)
            self.assertIn(json.loads(data)["error"]["code"], ("model_not_found", "not_found"))


if __name__ == "__main__":
    unittest.main()
