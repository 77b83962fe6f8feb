"""rnntd_ref.safetensors_io: round trips in every dtype, zero-size tensors, and malformed files."""
import json
import os
import struct
import tempfile
import unittest

import numpy as np

import refpath
from rnntd_ref.safetensors_io import bf16_to_f32, f32_to_bf16, read_safetensors, write_safetensors


def raw_file(path, header, data=b"", pad=True):
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h + data)


class TestSafetensors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "t.safetensors")

    def tearDown(self):
        self.tmp.cleanup()

    def test_round_trip_all_dtypes(self):
        rng = np.random.default_rng(0)
        t = {
            "a.f32": rng.standard_normal((3, 5)).astype(np.float32),
            "b.f16": rng.standard_normal((7,)).astype(np.float16),
            "c.i32": np.array([[1, -2], [3, 2**31 - 1]], dtype=np.int32),
            "d.i64": np.array([2**40, -5], dtype=np.int64),
            "e.scalar": np.float32(1.5).reshape(()),
        }
        write_safetensors(self.path, t, {"n_utts": "3", "x": "y"})
        got, meta = read_safetensors(self.path)
        self.assertEqual(meta, {"n_utts": "3", "x": "y"})
        self.assertEqual(set(got), set(t))
        for k, v in t.items():
            self.assertEqual(got[k].shape, v.shape, k)
            np.testing.assert_array_equal(got[k], v.astype(got[k].dtype))
        self.assertEqual(got["a.f32"].dtype, np.float32)
        self.assertEqual(got["b.f16"].dtype, np.float32)  # converted on read, as the C loader does
        self.assertEqual(got["c.i32"].dtype, np.int32)
        self.assertEqual(got["d.i64"].dtype, np.int64)

    def test_header_layout(self):
        write_safetensors(self.path, {"z": np.zeros(3, np.float32), "a": np.ones(2, np.float32)})
        blob = open(self.path, "rb").read()
        (n,) = struct.unpack("<Q", blob[:8])
        self.assertEqual(n % 8, 0)
        header = json.loads(blob[8:8 + n])
        self.assertEqual(header["a"], {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})
        self.assertEqual(header["z"]["data_offsets"], [8, 20])
        self.assertEqual(len(blob), 8 + n + 20)

    def test_float_dtype_conversion(self):
        x = np.array([1.0, -2.5, 65504.0, 1e-3, 3.140625], dtype=np.float32)
        for dt, tol in (("F16", 1e-3), ("BF16", 8e-3)):
            write_safetensors(self.path, {"x": x}, float_dtype=dt)
            hdr = json.loads(open(self.path, "rb").read()[8:][: struct.unpack("<Q", open(self.path, "rb").read()[:8])[0]])
            self.assertEqual(hdr["x"]["dtype"], dt)
            got, _ = read_safetensors(self.path)
            np.testing.assert_allclose(got["x"], x, rtol=tol)
        # float64 input is stored as F32
        write_safetensors(self.path, {"x": x.astype(np.float64)})
        got, _ = read_safetensors(self.path)
        np.testing.assert_array_equal(got["x"], x)

    def test_bf16_bits(self):
        # exact values survive; rounding is to nearest even; NaN stays NaN; the top half of f32 is bf16
        x = np.array([1.0, -2.0, 0.0, 2.0 ** 127, 2.0 ** -126, np.inf, -np.inf], dtype=np.float32)
        np.testing.assert_array_equal(bf16_to_f32(f32_to_bf16(x)), x)
        one_plus = np.array([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8], dtype=np.float32)  # halfway cases
        np.testing.assert_array_equal(bf16_to_f32(f32_to_bf16(one_plus)), [1.0, 1.0 + 2 ** -6])
        self.assertTrue(np.isnan(bf16_to_f32(f32_to_bf16(np.array([np.nan], np.float32))))[0])
        self.assertEqual(int(f32_to_bf16(np.array([1.0], np.float32))[0]), 0x3F80)

    def test_zero_size(self):
        t = {"empty": np.zeros((0, 4), np.float32), "tok": np.zeros((0,), np.int32), "x": np.ones(2, np.float32)}
        write_safetensors(self.path, t)
        blob = open(self.path, "rb").read()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        self.assertEqual(header["empty"]["shape"], [0, 4])
        b, e = header["empty"]["data_offsets"]
        self.assertEqual(b, e)
        got, _ = read_safetensors(self.path)
        self.assertEqual(got["empty"].shape, (0, 4))
        self.assertEqual(got["tok"].shape, (0,))
        np.testing.assert_array_equal(got["x"], [1, 1])

    def test_deterministic_bytes(self):
        t = {"b": np.arange(4, dtype=np.float32), "a": np.arange(3, dtype=np.int32)}
        write_safetensors(self.path, t, {"k": "v"})
        first = open(self.path, "rb").read()
        write_safetensors(self.path, dict(reversed(list(t.items()))), {"k": "v"})
        self.assertEqual(open(self.path, "rb").read(), first)

    def assertBad(self, header, data=b"", msg="", pad=True):
        raw_file(self.path, header, data, pad)
        with self.assertRaises(ValueError) as cm:
            read_safetensors(self.path)
        self.assertIn(msg, str(cm.exception))

    def test_malformed(self):
        f4 = struct.pack("<4f", 1, 2, 3, 4)
        self.assertBad({"a": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}}, f4 * 2, "unsupported dtype")
        self.assertBad({"a": {"dtype": "F32", "shape": [5], "data_offsets": [0, 16]}}, f4, "needs 20 bytes")
        self.assertBad({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 32]}}, f4, "outside the data area")
        self.assertBad({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, f4, "overlaps")
        self.assertBad({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, f4, "gap")
        self.assertBad({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, f4, "bytes after the last")
        self.assertBad({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}, b"", "bad shape")
        self.assertBad({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}}, f4[:4], "exactly")
        self.assertBad({"__metadata__": {"n": 3}}, b"", "__metadata__")
        # duplicate keys in the JSON
        h = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
        with open(self.path, "wb") as fh:
            fh.write(struct.pack("<Q", len(h)) + h + f4[:4])
        with self.assertRaisesRegex(ValueError, "duplicate"):
            read_safetensors(self.path)
        # header length beyond the file, beyond 16 MiB, truncated file, not JSON
        for blob, msg in ((struct.pack("<Q", 100) + b"{}", "past the end"),
                          (struct.pack("<Q", 1 << 40), "exceeds"),
                          (b"\x01\x02", "truncated"),
                          (struct.pack("<Q", 4) + b"{{{{", "not valid JSON")):
            with open(self.path, "wb") as fh:
                fh.write(blob)
            with self.assertRaisesRegex(ValueError, msg):
                read_safetensors(self.path)

    def test_writer_rejects(self):
        with self.assertRaises(ValueError):
            write_safetensors(self.path, {"x": np.array(["a"])})
        with self.assertRaises(ValueError):
            write_safetensors(self.path, {"x": np.zeros(2, np.float32)}, float_dtype="F64")


try:
    import safetensors.numpy as official  # the reference implementation, where installed
except ImportError:
    official = None


@unittest.skipIf(official is None, "the safetensors package is not installed")
class TestAgainstOfficialPackage(unittest.TestCase):
    """Where the safetensors package exists, files written by either side read the same in the other."""

    def test_both_ways(self):
        rng = np.random.default_rng(3)
        t = {"w": rng.standard_normal((4, 3)).astype(np.float32), "h": rng.standard_normal(5).astype(np.float16),
             "i": np.arange(6, dtype=np.int32).reshape(2, 3), "l": np.array([1, -1], np.int64),
             "z": np.zeros((0, 7), np.float32)}
        with tempfile.TemporaryDirectory() as d:
            ours, theirs = os.path.join(d, "ours"), os.path.join(d, "theirs")
            write_safetensors(ours, t, {"k": "v"})
            got = official.load_file(ours)
            for k, v in t.items():
                np.testing.assert_array_equal(got[k], v)
                self.assertEqual(got[k].dtype, v.dtype)
            official.save_file(t, theirs, metadata={"k": "v"})
            got, meta = read_safetensors(theirs)
            self.assertEqual(meta, {"k": "v"})
            for k, v in t.items():
                np.testing.assert_array_equal(got[k], v.astype(got[k].dtype))
            for name in sorted(os.listdir(refpath.GOLDEN)):
                path = os.path.join(refpath.GOLDEN, name, "weights.safetensors")
                if os.path.exists(path):
                    import safetensors.torch  # numpy has no bfloat16; torch does
                    a = safetensors.torch.load_file(path)
                    b, _ = read_safetensors(path)
                    self.assertEqual(sorted(a), sorted(b))
                    for k in a:
                        np.testing.assert_array_equal(a[k].float().numpy(), b[k], f"{name}: {k}")


if __name__ == "__main__":
    unittest.main()
