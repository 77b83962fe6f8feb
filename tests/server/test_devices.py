"""model.devices (issue 18): several device slots in one daemon, each with its own runners and workers.
On the CPU (the default; RNNTD_TEST_BACKEND=cpu) a list gives that many runner sets sharing the cores,
which exercises the dispatch and failover paths; with RNNTD_TEST_BACKEND=cuda (ctest gpu_daemon_devices,
label gpu) the same tests run [0, 0]: two runner sets on one GPU (exit 77 when no GPU is usable).
  - both slots serve, batches go round the idle slots, transcripts equal a one-slot daemon's, and
    /health and /metrics show each slot (device label);
  - RNNTD_FAULT=device1_fail:always: slot 1's batches fail as a failed launch; its jobs are decoded on
    slot 0 (every request 200), after 3 failures in a row slot 1 leaves rotation (log, /health
    "degraded", rnntd_device_up 0); SIGHUP builds it again and puts it back; SIGTERM drains, exit 0;
  - an error that clears (device1_fail:2) leaves the slot serving;
  - every slot failing: requests get 500 then 503 unavailable, /health/ready 503;
  - WebSocket streams: stream worker i runs on slot i mod slots, a new stream goes to a slot in rotation,
    and its final text is the whole utterance's (needs python3-websockets; skipped without it);
  - bad values of model.devices stop the daemon with file:line:column."""
import asyncio
import importlib.util
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from harness import BACKEND, BIN, MODEL, SLOW, Daemon, json_body, model_info, random_features

# On the CPU the numbers are not used; on CUDA both slots are device 0, or two GPUs with RNNTD_TEST_SLOTS="[0, 1]"
SLOTS = os.environ.get("RNNTD_TEST_SLOTS", "[0, 0]")


def health(d):
    st, _, data = d.request("GET", "/health")
    assert st == 200, data
    return json.loads(data)


def cuda_usable():
    """On the CUDA backend: 1 when a daemon starts (a GPU is there), else 0 (the test is skipped)."""
    try:
        d = Daemon(MODEL, "model:\n  devices: [0]\n")
    except RuntimeError as e:
        if "no usable CUDA device" in str(e) or "no CUDA backend" in str(e):
            return 0
        raise
    d.stop()
    d.close()
    return 1


class Devices(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dim = model_info(MODEL)["feature_dim"]
        cls.bodies = [json_body(20 + 7 * i, cls.dim, random_features(20 + 7 * i, cls.dim, 100 + i)) for i in range(8)]

    def setUp(self):
        self.daemons = []

    def tearDown(self):
        for d in self.daemons:
            d.close()

    def start(self, config, env=None, **kw):
        d = Daemon(MODEL, config, env=env, **kw)
        self.daemons.append(d)
        return d

    def finish(self, d):
        return d.stop_clean()

    def texts(self, d, parallel=False):
        out = [None] * len(self.bodies)

        def one(i):
            st, _, doc = d.transcribe(self.bodies[i])
            out[i] = (st, doc)

        if parallel:
            ts = [threading.Thread(target=one, args=(i,)) for i in range(len(self.bodies))]
            [t.start() for t in ts]
            [t.join(60 * SLOW) for t in ts]
        else:
            for i in range(len(self.bodies)):
                one(i)
        for st, doc in out:
            self.assertEqual(st, 200, doc)
        return [(doc["text"], [t["id"] for t in doc["tokens"]]) for _, doc in out]

    def test_two_slots_serve(self):
        one = self.start("model:\n  devices: [0]\nbatching:\n  workers: 1\n")
        ref = self.texts(one)
        self.assertEqual(len(health(one)["devices"]), 1)
        self.finish(one)
        d = self.start("model:\n  devices: %s\nbatching:\n  workers: 1\n" % SLOTS)
        h = health(d)
        self.assertEqual(h["status"], "ok")
        self.assertEqual([x["index"] for x in h["devices"]], [0, 1])
        ordinals = json.loads(SLOTS)
        for i, x in enumerate(h["devices"]):
            self.assertEqual((x["status"], x["error"], x["workers"]), ("ok", None, 1))
            if BACKEND == "cuda":
                self.assertEqual(x["ordinal"], ordinals[i])
                self.assertGreater(x["memory_used_bytes"], 0)
                self.assertGreater(x["memory_total_bytes"], x["memory_used_bytes"])
            else:
                self.assertIsNone(x["ordinal"])
                self.assertIsNone(x["memory_used_bytes"])
        # One at a time: the idle slots take turns (the one whose last batch started longest ago).
        self.assertEqual(self.texts(d), ref)
        self.assertEqual(self.texts(d, parallel=True), ref)
        m = d.settled_metrics()
        b0, b1 = m['rnntd_device_batches_total{device="0"}'], m['rnntd_device_batches_total{device="1"}']
        self.assertGreaterEqual(min(b0, b1), 4, (b0, b1))
        self.assertEqual(b0 + b1, m["rnntd_batches_total"])
        self.assertEqual(m['rnntd_device_up{device="1"}'], 1)
        self.assertGreater(m['rnntd_device_busy_seconds_total{device="0"}'], 0)
        self.assertEqual(m['rnntd_device_errors_total{device="0"}'], 0)
        h = health(d)
        self.assertEqual(sum(x["batches"] for x in h["devices"]), h["batches"])
        self.assertIn("devices=2 devices_up=2 workers=2", d.log())
        self.finish(d)

    def test_failing_slot_leaves_rotation(self):
        d = self.start("model:\n  devices: %s\nbatching:\n  workers: 1\n" % SLOTS, env={"RNNTD_FAULT": "device1_fail:always"})
        ref = None
        for _ in range(3):  # every request answered, slot 1's share decoded again on slot 0
            got = self.texts(d)
            ref = ref or got
            self.assertEqual(got, ref)
        h = health(d)
        self.assertEqual(h["status"], "degraded")
        self.assertTrue(h["ready"])
        self.assertEqual(h["devices"][0]["status"], "ok")
        s1 = h["devices"][1]
        self.assertEqual((s1["status"], s1["errors"]), ("failed", 3))
        self.assertIn("injected fault device1_fail", s1["error"])
        m = d.settled_metrics()
        self.assertEqual(m['rnntd_device_up{device="1"}'], 0)
        self.assertEqual(m['rnntd_device_errors_total{device="1"}'], 3)
        self.assertEqual(m["rnntd_decode_failures_total"], 0)
        self.assertEqual(m['rnntd_requests_total{endpoint="transcribe",code="200"}'], 3 * len(self.bodies))
        self.assertIn('msg="device out of rotation" device=1', d.log())
        # A reload builds slot 1 again and puts it back.
        d.send_signal(signal.SIGHUP)
        end = time.monotonic() + 20 * SLOW
        while time.monotonic() < end and health(d)["devices"][1]["status"] != "ok":
            time.sleep(0.05)
        h = health(d)
        self.assertEqual((h["status"], h["devices"][1]["status"], h["devices"][1]["error"]), ("ok", "ok", None))
        self.assertIn('msg="device back in rotation" device=1', d.log())
        self.assertEqual(self.texts(d, parallel=True), ref)
        log = self.finish(d)
        self.assertIn("msg=stopped", log)

    def test_error_that_clears(self):
        d = self.start("model:\n  devices: %s\nbatching:\n  workers: 1\n" % SLOTS, env={"RNNTD_FAULT": "device1_fail:2"})
        ref = self.texts(d)
        self.assertEqual(self.texts(d), ref)
        h = health(d)
        self.assertEqual(h["status"], "ok")
        self.assertEqual((h["devices"][1]["status"], h["devices"][1]["errors"]), ("ok", 2))
        self.assertGreater(h["devices"][1]["batches"], 2)  # back to serving after the errors
        self.finish(d)

    def test_every_slot_fails(self):
        d = self.start("model:\n  devices: %s\nbatching:\n  workers: 1\n" % SLOTS,
                       env={"RNNTD_FAULT": "device0_fail:always,device1_fail:always"})
        codes = []
        for i in range(8):
            st, _, doc = d.transcribe(self.bodies[i % len(self.bodies)])
            codes.append((st, doc["error"]["code"]))
        self.assertIn((500, "internal"), codes)
        self.assertEqual(codes[-1], (503, "unavailable"))
        h = health(d)
        self.assertEqual((h["status"], h["ready"]), ("unavailable", False))
        self.assertEqual([x["status"] for x in h["devices"]], ["failed", "failed"])
        st, _, _ = d.request("GET", "/health/ready")
        self.assertEqual(st, 503)
        # Each request answered 500 is one failed decode (a job run again elsewhere counts once, at its end).
        self.assertEqual(d.settled_metrics()["rnntd_decode_failures_total"], codes.count((500, "internal")))
        self.finish(d)

    @unittest.skipIf(importlib.util.find_spec("websockets") is None, "no websockets module")
    def test_streams_stay_on_slots_in_rotation(self):
        import websockets
        d = self.start("model:\n  devices: %s\nbatching:\n  workers: 1\nstreaming:\n  tick_ms: 10\n" % SLOTS,
                       env={"RNNTD_FAULT": "device1_fail:3"})
        dim = self.dim
        feats = [random_features(40 + 9 * i, dim, 300 + i) for i in range(4)]

        async def streams(n, wait_health):
            socks = []
            for i in range(n):
                ws = await websockets.connect("ws://127.0.0.1:%d/v1/stream" % d.port, max_size=None, ping_interval=None)
                await ws.send(json.dumps({"type": "config", "encoding": "features", "partials": False}))
                self.assertEqual(json.loads(await ws.recv())["type"], "ready")
                socks.append(ws)
            seen = wait_health()  # every stream open: where are they?
            finals = []
            for ws, f in zip(socks, feats):
                await ws.send(struct.pack("<%df" % len(f), *f))
                await ws.send(json.dumps({"type": "eof"}))
                while True:
                    doc = json.loads(await ws.recv())
                    if doc["type"] == "final":
                        finals.append(doc["text"])
                        break
                    self.assertNotEqual(doc["type"], "error", doc)
                await ws.close()
            return seen, finals

        def per_slot():
            return [x["streams"] for x in health(d)["devices"]]

        seen, first = asyncio.run(asyncio.wait_for(streams(4, per_slot), 60 * SLOW))
        self.assertEqual(seen, [2, 2])  # two stream workers, one per slot: the least loaded takes each
        # The whole utterances over HTTP, until slot 1 leaves rotation (3 failed batches there, their
        # jobs decoded on slot 0).
        whole = []
        for i in range(12):
            f = feats[i % len(feats)]
            st, _, doc = d.transcribe(json_body(len(f) // dim, dim, f))
            self.assertEqual(st, 200, doc)
            whole.append(doc["text"])
        self.assertEqual(whole[4:8], whole[:4])
        whole = whole[:4]
        self.assertEqual(first, whole)
        self.assertEqual(health(d)["devices"][1]["status"], "failed")
        seen, finals = asyncio.run(asyncio.wait_for(streams(4, per_slot), 60 * SLOW))
        self.assertEqual(seen, [4, 0])
        self.assertEqual(finals, whole)
        self.finish(d)

    def test_bad_values(self):
        for text, want in (("[]", "an empty list"), ("[0, x]", "expected auto or a list of integers"),
                           ("[0, 64]", "out of range"), ("cpu", "expected auto or a list"),
                           ("{a: 1}", "expected a single value"), ("[" + ", ".join(["0"] * 17) + "]", "more than 16")):
            with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
                f.write("model:\n  devices: %s\n" % text)
                f.flush()
                r = subprocess.run([BIN, "--check-config", "--config", f.name, "--model", MODEL], capture_output=True,
                                   text=True, timeout=30)
                self.assertEqual(r.returncode, 2, (text, r.stderr))
                self.assertIn("model.devices", r.stderr)
                self.assertIn(want, r.stderr)
                self.assertRegex(r.stderr, r"\.yaml:2:\d+: ")
        if BACKEND == "cuda":
            with self.assertRaisesRegex(RuntimeError, "model.devices: CUDA device 63 does not exist"):
                self.start("model:\n  devices: [63]\n")


if __name__ == "__main__":
    if not MODEL or not os.path.isdir(MODEL):
        print("no test model (RNNTD_MODEL)")
        sys.exit(77)
    if BACKEND == "cuda" and not cuda_usable():
        print("SKIP: no usable CUDA device")
        sys.exit(77)
    unittest.main()
