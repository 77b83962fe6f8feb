#!/usr/bin/env python3
"""Writes the committed seed corpora (corpus/<target>/) from the golden models, the shipped model's
model.yaml and conf/rnntd.yaml, plus small hand-made valid and near-valid inputs. Deterministic;
rerun after a format change (python3 tests/fuzz/make_seeds.py). Files named crash-* or regress-*
(inputs that once found a bug) are never touched."""
import io
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
GOLDENS = ["hard_bb", "hard_f16", "hard_timestack", "soft_bf16", "soft_bigblank_cap", "soft_plain"]  # fuzz_model.c's order


def read(*p):
    with open(os.path.join(ROOT, *p), "rb") as f:
        return f.read()


def write_corpus(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if not name.startswith(("crash-", "regress-")):
            os.remove(os.path.join(d, name))
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print(f"{target}: {len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes")


def npy_bytes(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a)
    else:
        np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def npy_seeds():
    s = {}
    for i in range(4):
        s[f"golden-hard_bb-utt{i}.npy"] = read("tests", "data", "golden", "hard_bb", f"utt{i}.npy")
    s["golden-hard_f16-utt1.npy"] = read("tests", "data", "golden", "hard_f16", "utt1.npy")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 80)).astype(np.float32)
    s["f32-3x80.npy"] = npy_bytes(a)
    s["f16-2x80.npy"] = npy_bytes(a[:2].astype(np.float16))
    s["f32-v2.npy"] = npy_bytes(a[:1, :4], version=(2, 0))
    s["f32-v3.npy"] = npy_bytes(a[:1, :4], version=(3, 0))
    s["empty-0x80.npy"] = npy_bytes(np.zeros((0, 80), np.float32))
    # near-valid: each breaks one rule
    s["bad-fortran.npy"] = npy_bytes(np.asfortranarray(a[:2, :3]))
    s["bad-bigendian.npy"] = npy_bytes(a[:1, :3].astype(">f4"))
    s["bad-f64.npy"] = npy_bytes(a[:1, :3].astype(np.float64))
    s["bad-rank1.npy"] = npy_bytes(a[0, :3])
    s["bad-rank3.npy"] = npy_bytes(a[:2, :2].reshape(1, 2, 2))
    s["bad-nan.npy"] = npy_bytes(np.array([[1.0, np.nan]], np.float32))
    s["bad-inf-f16.npy"] = npy_bytes(np.array([[1.0, np.inf]], np.float16))
    s["bad-truncated.npy"] = npy_bytes(a[:2, :3])[:-5]
    s["bad-trailing.npy"] = npy_bytes(a[:2, :3]) + b"\0\0\0\0"
    return s


def json_seeds():
    s = {}
    s["valid.json"] = b'{"features": [[-4.1, -3.9, -5.2], [-4.0, -3.7, -5.0]], "timestamps": true}'
    s["valid-no-ts.json"] = b'{"timestamps": false, "features": [[1e-3, 2.5E2, -0.0]]}'
    s["empty-frames.json"] = b'{"features": []}'
    s["query-then-body.json"] = b'?timestamps=false\n{"features": [[1, 2, 3]]}'
    s["query-flag.json"] = b'?timestamps\n{"features": [[1, 2, 3]], "timestamps": true}'
    s["query-several.json"] = b'?timestamps=1&timestamps=0\n{"features": [[0.5, 0.25, 0.125]]}'
    s["bad-query.json"] = b'?verbose=2\n{"features": [[1, 2, 3]]}'
    s["bad-width.json"] = b'{"features": [[1, 2, 3], [1, 2]]}'
    s["bad-dup.json"] = b'{"features": [[1, 2, 3]], "features": []}'
    s["bad-overflow.json"] = b'{"features": [[1e39, 2, 3]]}'
    s["bad-deep.json"] = b'{"features": [[[[[[[[[1]]]]]]]]]}'
    s["bad-string.json"] = b'{"features": [["1", 2, 3]]}'
    s["bad-unicode.json"] = '{"features": [[1, 2, 3]], "caf\u00e9\\u0000": 1}'.encode()
    s["bad-truncated.json"] = b'{"features": [[1, 2, 3], [4, 5'
    s["too-many.json"] = json.dumps({"features": [[0, 0, 0]] * 17}).encode()
    return s


def cfg_seeds():
    s = {"rnntd.yaml": read("conf", "rnntd.yaml")}
    s["small.yaml"] = b"server:\n  listen: '::1'\n  port: 0\nmodel:\n  path: /tmp/m\n  backend: cpu\nbatching:\n  workers: 2\n  max_batch: 8\n"
    s["flow.yaml"] = b"{server: {port: 8081, auth_token_file: ''}, log: {level: debug, requests: false}}\n"
    s["limits.yaml"] = b"limits:\n  max_body_bytes: 1048576\n  max_json_bytes: 1048576\n  max_frames: 100\n"
    s["quoted-path.yaml"] = b"model:\n  path: \"/srv/models/a b: 'c'\"\n"
    s["bad-unknown.yaml"] = b"server:\n  port: 9\n  nope: 1\n"
    s["bad-range.yaml"] = b"server:\n  port: 70000\n"
    s["bad-two-docs.yaml"] = b"server: {port: 1}\n---\nserver: {port: 2}\n"
    s["bad-anchor.yaml"] = b"server: &a {port: 1}\nmodel: *a\n"
    s["bad-cross.yaml"] = b"limits:\n  max_body_bytes: 1000\n  max_json_bytes: 2000\n"
    s["bad-pending.yaml"] = b"limits:\n  max_body_bytes: 4096\n  max_json_bytes: 2048\n  max_pending_bytes: 2048\n"
    s["listen-bracketed.yaml"] = b"server:\n  listen: \"[::1]\"\n"
    return s


def st_bytes(tensors, meta=None):
    header, data, off = {}, b"", 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def st_seeds():
    f32 = np.arange(6, dtype=np.float32).tobytes()
    s = {"golden-hard_f16-weights.safetensors": read("tests", "data", "golden", "hard_f16", "weights.safetensors")}
    s["all-dtypes.safetensors"] = st_bytes({
        "a": ("F32", [2, 3], f32),
        "b": ("F16", [3], np.ones(3, np.float16).tobytes()),
        "c": ("BF16", [2], b"\x80\x3f\x00\x40"),
        "d": ("I32", [2], np.array([1, -2], np.int32).tobytes()),
        "e": ("I64", [1], np.array([7], np.int64).tobytes()),
        "scalar": ("F32", [], np.float32(1).tobytes()),
        "empty": ("F32", [0, 4], b""),
    }, meta={"format": "rnntd", "name": "x"})
    s["empty.safetensors"] = st_bytes({})
    s["bad-gap.safetensors"] = st_bytes({"a": ("F32", [2], f32[:8])}) + b"\0\0\0\0"  # 4 bytes no tensor covers
    s["bad-nan.safetensors"] = st_bytes({"a": ("F32", [2], np.array([1, np.nan], np.float32).tobytes())})
    s["bad-i64-range.safetensors"] = st_bytes({"a": ("I64", [1], np.array([1 << 40], np.int64).tobytes())})
    s["bad-truncated.safetensors"] = st_bytes({"a": ("F32", [6], f32)})[:-4]
    s["bad-dtype.safetensors"] = st_bytes({"a": ("F64", [1], b"\0" * 8)})
    # two tensors on the same bytes, and a hole between two tensors (offsets written by hand)
    def raw(header, data):
        h = json.dumps(header, separators=(",", ":")).encode()
        return struct.pack("<Q", len(h)) + h + data
    s["bad-overlap.safetensors"] = raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, f32[:12])
    s["bad-hole.safetensors"] = raw({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                     "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, f32[:12])
    return s


def model_seeds():
    s = {}
    for i, g in enumerate(GOLDENS):
        y, t = read("tests", "data", "golden", g, "model.yaml"), read("tests", "data", "golden", g, "tokens.txt")
        s[f"golden-{g}"] = bytes([i]) + y + b"\0" + t
    y0, t0 = read("tests", "data", "golden", GOLDENS[0], "model.yaml"), read("tests", "data", "golden", GOLDENS[0], "tokens.txt")
    s["shipped-en-char-small"] = b"\0" + read("models", "en-char-small", "model.yaml") + b"\0" + read("models", "en-char-small", "tokens.txt")
    s["bad-vocab"] = b"\0" + y0.replace(b"vocab_size: 9", b"vocab_size: 10") + b"\0" + t0
    s["bad-dup-token"] = b"\0" + y0 + b"\0" + t0.replace(b"b\n", b"a\n")
    s["bad-crlf-tokens"] = b"\0" + y0 + b"\0" + t0.replace(b"\n", b"\r\n")
    s["bad-big-blanks"] = b"\0" + y0.replace(b"[2, 4, 8]", b"[2, 2]") + b"\0" + t0
    s["bad-layer-input"] = b"\0" + y0.replace(b"input: 40", b"input: 41") + b"\0" + t0
    s["bad-unknown-key"] = b"\0" + y0 + b"extra: 1\n\0" + t0
    s["bad-nine-big-blanks"] = b"\0" + y0.replace(b"[2, 4, 8]", b"[2, 3, 4, 5, 6, 7, 8, 9, 10]") + b"\0" + t0
    s["boundary-tokens"] = b"\0" + y0 + b"\0" + t0.replace(b"a\n", b"\xe2\x96\n").replace(b"b\n", b"\xe2\x96\x81\xe2\x96\x81\n")
    return s


def main():
    write_corpus("npy", npy_seeds())
    write_corpus("json", json_seeds())
    write_corpus("cfg", cfg_seeds())
    write_corpus("safetensors", st_seeds())
    write_corpus("model", model_seeds())


if __name__ == "__main__":
    sys.exit(main())
