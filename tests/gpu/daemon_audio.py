#!/usr/bin/env python3
"""Audio over HTTP on the CUDA backend against the CPU daemon (issue 12: the daemon sends PCM to the
CUDA runner, and word confidences on CUDA).

Starts rnntd on the shipped model with --backend cpu, cuda fp32 and cuda fp16 (one worker each, batches
held 0.2 s so that concurrent requests share one batch), and for every daemon posts the shipped sample
WAVs:
  - one at a time to POST /v1/transcribe?timestamps=true (audio/wav) and to
    POST /v1/audio/transcriptions (multipart, verbose_json, word timestamps);
  - all at once together with the samples' .npy features (so that one batch holds PCM and features).
Checks: the CUDA daemons' transcripts equal the CPU daemon's (fp32 and fp16), word for word with the
same start/end times in fp32, and each word's confidence within CONF_TOL of the CPU's in fp32 (they are
never null on CUDA); the features requests give the same text as the audio ones; the CUDA daemon's
request log says input=pcm for the audio requests (the CPU daemon's input=features).
  daemon_audio.py RNNTD_BINARY MODEL_DIR [OUT_DIR]     exit 0 when every check passes
DAEMON_AUDIO_RUNS=cpu:fp32,... picks the daemons (the first must be cpu:fp32; default cpu:fp32,cuda:fp32,cuda:fp16);
a third field (cpu:fp32:pcm) starts that daemon with RNNTD_AUDIO_PCM=1 (PCM to the runner on any backend).
"""
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

CONF_TOL = 1e-4  # fp32: the token probabilities agree within ~1e-6 (test_cuda_engine measures them)

CONFIG = """batching:
  workers: 1
  max_batch: 16
  max_delay_us: 200000
  delay_when_idle: true
log:
  requests: true
"""


def start(binary, model, backend, precision, out_dir, pcm):
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    cfg.write(CONFIG)
    cfg.close()
    log_path = os.path.join(out_dir, "rnntd-audio-%s-%s%s.log" % (backend, precision, "-pcm" if pcm else ""))
    log = open(log_path, "w")
    env = dict(os.environ)
    env.pop("RNNTD_AUDIO_PCM", None)
    if pcm:
        env["RNNTD_AUDIO_PCM"] = "1"
    p = subprocess.Popen([binary, "--config", cfg.name, "--model", model, "--backend", backend, "--precision", precision,
                          "--port", "0"], stderr=log, stdout=log, env=env)
    port = None
    for _ in range(1200):
        text = open(log_path).read()
        m = re.search(r"msg=listening .*port=(\d+)", text)
        if m and "msg=ready" in text:
            port = int(m.group(1))
            break
        if p.poll() is not None:
            break
        time.sleep(0.1)
    if port is None:
        p.kill()
        sys.exit("rnntd --backend %s did not start:\n%s" % (backend, open(log_path).read()[-2000:]))
    return p, port, log_path


def post(port, path, body, ctype):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body, method="POST",
                                 headers={"Content-Type": ctype})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, r.read()


def transcribe(port, wav):
    st, body = post(port, "/v1/transcribe?timestamps=true", open(wav, "rb").read(), "audio/wav")
    return json.loads(body)


def openai(port, wav):
    b = uuid.uuid4().hex
    parts = []
    for k, v in (("model", "whisper-1"), ("response_format", "verbose_json"), ("timestamp_granularities[]", "word")):
        parts.append(('--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (b, k, v)).encode())
    parts.append(('--%s\r\nContent-Disposition: form-data; name="file"; filename="%s"\r\nContent-Type: audio/wav\r\n\r\n'
                  % (b, os.path.basename(wav))).encode() + open(wav, "rb").read() + b"\r\n")
    parts.append(("--%s--\r\n" % b).encode())
    st, body = post(port, "/v1/audio/transcriptions", b"".join(parts), "multipart/form-data; boundary=" + b)
    return json.loads(body)


def together(port, wavs, npys):
    """Every WAV and every .npy at once: one batch of PCM and features on the CUDA daemon."""
    with concurrent.futures.ThreadPoolExecutor(len(wavs) + len(npys)) as ex:
        fa = [ex.submit(post, port, "/v1/transcribe", open(w, "rb").read(), "audio/wav") for w in wavs]
        ff = [ex.submit(post, port, "/v1/transcribe", open(n, "rb").read(), "application/x-npy") for n in npys]
        return [json.loads(f.result()[1]) for f in fa], [json.loads(f.result()[1]) for f in ff]


def main():
    binary, model = sys.argv[1], sys.argv[2]
    out_dir = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp()
    os.makedirs(out_dir, exist_ok=True)
    wavs = sorted(glob.glob(os.path.join(model, "samples", "*.wav")))
    npys = [w[:-4] + ".npy" for w in wavs]
    results, logs, failures = {}, {}, []
    runs = [tuple(x.split(":")) for x in os.environ.get("DAEMON_AUDIO_RUNS", "cpu:fp32,cuda:fp32,cuda:fp16").split(",")]
    for key in runs:
        backend, precision = key[0], key[1]
        p, port, log_path = start(binary, model, backend, precision, out_dir, len(key) > 2)
        try:
            native = [transcribe(port, w) for w in wavs]
            oai = [openai(port, w) for w in wavs]
            batch_a, batch_f = together(port, wavs, npys)
            batch_sizes = sorted({r["batch_size"] for r in batch_a + batch_f})
        finally:
            p.terminate()
            p.wait(timeout=60)
        results[key] = (native, oai, batch_a, batch_f, batch_sizes)
        logs[key] = open(log_path).read()
    cpu = results[("cpu", "fp32")]
    print("%-34s %-10s %-6s %s" % ("sample", "daemon", "same", "text / word confidences"))
    for key in runs:
        native, oai, batch_a, batch_f, sizes = results[key]
        name = " ".join(key)
        strict = key[1] == "fp32" and key != ("cpu", "fp32")  # fp32 against the CPU: words, times, confidences
        for i, w in enumerate(wavs):
            ref = cpu[0][i]
            same = native[i]["text"] == ref["text"] and oai[i]["text"] == ref["text"] and batch_a[i]["text"] == ref["text"]
            same = same and batch_f[i]["text"] == ref["text"]
            confs = [x["confidence"] for x in native[i].get("words", [])]
            if any(c is None for c in confs):
                failures.append("%s %s: a null word confidence" % (name, os.path.basename(w)))
            if not same:
                failures.append("%s %s: text %r, CPU %r (openai %r, batched %r, features %r)" % (
                    name, os.path.basename(w), native[i]["text"], ref["text"], oai[i]["text"], batch_a[i]["text"],
                    batch_f[i]["text"]))
            worst = 0.0
            if strict:
                rw, gw = ref.get("words", []), native[i].get("words", [])
                ow = oai[i].get("words", [])
                if [x["word"] for x in rw] != [x["word"] for x in gw] or len(ow) != len(gw):
                    failures.append("%s %s: words differ" % (name, os.path.basename(w)))
                for a, b in zip(rw, gw):
                    if abs(a["start"] - b["start"]) > 1e-9 or abs(a["end"] - b["end"]) > 1e-9:
                        failures.append("%s %s: word %r times differ" % (name, os.path.basename(w), a["word"]))
                    if a["confidence"] is None or b["confidence"] is None:
                        continue
                    worst = max(worst, abs(a["confidence"] - b["confidence"]))
                for a, b in zip(gw, ow):
                    if b.get("confidence") is None or abs(a["confidence"] - b["confidence"]) > 1e-6:
                        failures.append("%s %s: verbose_json confidence of %r differs from /v1/transcribe's" % (
                            name, os.path.basename(w), a["word"]))
                if worst > CONF_TOL:
                    failures.append("%s %s: word confidence %.3g from the CPU's (> %g)" % (
                        name, os.path.basename(w), worst, CONF_TOL))
            print("%-34s %-10s %-6s %r %s%s" % (os.path.basename(w), name, "yes" if same else "NO", native[i]["text"],
                                              ["%.4f" % c for c in confs if c is not None],
                                              " (max |d| vs CPU %.2g)" % worst if strict else ""))
        print("  %s: batch sizes of the concurrent requests %s" % (name, sizes))
    for key, text in logs.items():
        inputs = re.findall(r"path=/v1/(?:transcribe|audio/transcriptions)\S* status=200 .*? input=(\w+)", text)
        pcm = key[0] == "cuda" or len(key) > 2
        n_audio = 3 * len(wavs)
        want = {"pcm": n_audio if pcm else 0, "features": len(npys) + (0 if pcm else n_audio)}
        got = {k: inputs.count(k) for k in want}
        print("  %s request log: input=pcm %d, input=features %d (want %d, %d)" % (
            " ".join(key), got["pcm"], got["features"], want["pcm"], want["features"]))
        if got != want:
            failures.append("%s: request log inputs %s, want %s" % (" ".join(key), got, want))
    for f in failures:
        print("FAIL:", f)
    print("daemon_audio: %s" % ("PASSED" if not failures else "%d FAILED" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
