"""GET /captions in a real headless Chromium: the page takes the "microphone" (Chromium's fake capture
device playing a sample WAV: --use-fake-device-for-media-stream --use-fake-ui-for-media-stream
--use-file-for-fake-audio-capture), streams it to /v1/stream and must show the sample's transcript.
The page's text is read through the DevTools protocol (Runtime.evaluate over its WebSocket).

Skips (exit 77) only when no chromium binary is installed (deploy/install-deps.sh --test installs
Debian's `chromium`). Needs python3-websockets (re-runs itself with /usr/bin/python3 if needed)."""
import importlib.util
import os
import sys

if importlib.util.find_spec("websockets") is None:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("test_captions.py needs the websockets module: apt-get install python3-websockets")

import asyncio
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import websockets

from harness import SLOW, Daemon

SHIPPED = os.environ.get("RNNTD_SHIPPED", os.path.join(os.path.dirname(__file__), "..", "..", "models", "en-char-small"))
SAMPLE = "01-flite-kal16"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


async def page_text(ws_url, expected, timeout):
    async with websockets.connect(ws_url, max_size=None, ping_interval=None) as cdp:
        n = 0
        end = time.monotonic() + timeout
        text = ""
        while time.monotonic() < end:
            n += 1
            await cdp.send(json.dumps({"id": n, "method": "Runtime.evaluate", "params": {
                "expression": "document.getElementById('captions').textContent + ' | ' + "
                              "document.getElementById('status').textContent", "returnByValue": True}}))
            while True:
                doc = json.loads(await cdp.recv())
                if doc.get("id") == n:
                    break
            text = doc.get("result", {}).get("result", {}).get("value", "")
            captions = text.split(" | ")[0]
            if expected in " ".join(captions.split()):
                return True, text
            await asyncio.sleep(0.5)
        return False, text


def main():
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not chrome:
        print("SKIP: no chromium installed (apt-get install chromium; deploy/install-deps.sh --test)")
        return 77
    wav = os.path.abspath(os.path.join(SHIPPED, "samples", SAMPLE + ".wav"))
    d = Daemon(model=SHIPPED)
    prof = tempfile.mkdtemp(prefix="rnntd-chromium-")
    proc = None
    try:
        with open(os.path.join(SHIPPED, "samples", SAMPLE + ".npy"), "rb") as f:
            st, _, whole = d.transcribe(f.read(), "application/x-npy")
        assert st == 200, whole
        expected = whole["text"]
        st, hd, body = d.request("GET", "/captions")
        assert st == 200 and hd["content-type"].startswith("text/html") and b"/v1/stream" in body, (st, hd)
        dport = free_port()
        proc = subprocess.Popen([chrome, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                 "--user-data-dir=" + prof, "--remote-debugging-port=%d" % dport,
                                 "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                                 "--use-file-for-fake-audio-capture=" + wav, "--autoplay-policy=no-user-gesture-required",
                                 "http://127.0.0.1:%d/captions?autostart=1" % d.port],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ws_url = None
        end = time.monotonic() + 30 * SLOW
        while time.monotonic() < end and not ws_url:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/json" % dport, timeout=2) as r:
                    for t in json.loads(r.read()):
                        if t.get("type") == "page" and "/captions" in t.get("url", ""):
                            ws_url = t["webSocketDebuggerUrl"]
            except OSError:
                time.sleep(0.2)
        if not ws_url:
            print("FAIL: chromium's DevTools endpoint did not come up")
            return 1
        ok, text = asyncio.run(page_text(ws_url, expected, float(os.environ.get("CAPTIONS_WAIT", 60)) * SLOW))
        print("page: %r" % text[:300])
        print("server: %s" % {k: v for k, v in d.metrics().items() if "stream" in k and "bucket" not in k})
        print("expected: %r" % expected)
        if not ok:
            print("FAIL: the page did not show the sample's transcript")
            return 1
        m = d.metrics()
        assert m['rnntd_streams_total{outcome="started"}'] >= 1
        print("OK: the captions page shows the transcript of %s" % SAMPLE)
        return 0
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        d.stop()
        d.close()
        shutil.rmtree(prof, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
