"""safetensors read/write without the safetensors package (FORMAT.md, weights.safetensors).

Layout: 8-byte little-endian header length N, N bytes of JSON, then the data area. Offsets are relative
to the end of the header and must tile the data area exactly. Reading is as strict as the C loader
(so a file this module accepts is one the engine accepts, and vice versa for what we write).
"""
import json
import struct

import numpy as np

MAX_HEADER = 16 << 20

# dtype name -> (numpy dtype of the stored bytes, bytes per element)
_STORED = {
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),
    "I32": (np.dtype("<i4"), 4),
    "I64": (np.dtype("<i8"), 8),
}


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r} in safetensors header")
        out[k] = v
    return out


def bf16_to_f32(u16):
    """bfloat16 bit patterns (uint16) -> float32."""
    return (np.asarray(u16, dtype=np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even; NaN stays NaN."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def read_safetensors(path):
    """Read a safetensors file -> (dict name -> np.ndarray, metadata dict).

    F32/F16/BF16 come back as float32, I32 as int32, I64 as int64. Raises ValueError on any malformed
    header (bad JSON, unknown dtype, offsets that overlap, leave gaps or lie outside the file)."""
    with open(path, "rb") as fh:
        blob = fh.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: truncated (no header length)")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER:
        raise ValueError(f"{path}: header length {n} exceeds {MAX_HEADER}")
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    data = memoryview(blob)[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError(f"{path}: __metadata__ must map strings to strings")
    spans = []
    tensors = {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError(f"{path}: tensor {name!r}: entry needs exactly dtype, shape, data_offsets")
        dt = info["dtype"]
        if dt not in _STORED:
            raise ValueError(f"{path}: tensor {name!r}: unsupported dtype {dt!r}")
        shape = info["shape"]
        offs = info["data_offsets"]
        if (not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape)):
            raise ValueError(f"{path}: tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs)
                or not 0 <= offs[0] <= offs[1] <= len(data)):
            raise ValueError(f"{path}: tensor {name!r}: data_offsets {offs!r} outside the data area "
                             f"of {len(data)} bytes")
        np_dt, size = _STORED[dt]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count * size != offs[1] - offs[0]:
            raise ValueError(f"{path}: tensor {name!r}: shape {shape} {dt} needs {count * size} bytes, "
                             f"data_offsets give {offs[1] - offs[0]}")
        spans.append((offs[0], offs[1], name))
        raw = np.frombuffer(data[offs[0]:offs[1]], dtype=np_dt, count=count).reshape(shape)
        if dt == "BF16":
            arr = bf16_to_f32(raw).reshape(shape)
        elif dt == "F16":
            arr = raw.astype(np.float32)
        else:
            arr = raw.astype(np_dt.newbyteorder("="), copy=True)
        tensors[name] = arr
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a gap at byte {pos}"
            raise ValueError(f"{path}: tensor {name!r}: data {what}")
        pos = end
    if pos != len(data):
        raise ValueError(f"{path}: {len(data) - pos} bytes after the last tensor")
    return tensors, dict(metadata)


def _as_numpy(x):
    if hasattr(x, "detach"):  # a torch tensor, without importing torch here
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def write_safetensors(path, tensors, metadata=None, float_dtype=None):
    """Write tensors (name -> np.ndarray or torch tensor) to path.

    Stored dtype follows the array (float32 F32, float16 F16, int32 I32, int64 I64; float64 is stored
    as F32). float_dtype ('F32' | 'F16' | 'BF16') converts every floating tensor. Tensors are written in
    name order and the header is padded with spaces to a multiple of 8, so the bytes are deterministic.
    """
    if float_dtype not in (None, "F32", "F16", "BF16"):
        raise ValueError(f"float_dtype must be F32, F16 or BF16, not {float_dtype!r}")
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    pos = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("a tensor can not be named __metadata__")
        a = _as_numpy(tensors[name])
        if a.dtype.kind == "f":
            dt = float_dtype or ("F16" if a.dtype == np.float16 else "F32")
            if dt == "F32":
                b = a.astype("<f4").tobytes()
            elif dt == "F16":
                b = a.astype("<f2").tobytes()
            else:
                b = f32_to_bf16(a.astype(np.float32)).astype("<u2").tobytes()
        elif a.dtype.kind in "iub" and a.dtype.itemsize <= 4 and not (a.dtype.kind == "u" and a.dtype.itemsize == 4):
            dt, b = "I32", a.astype("<i4").tobytes()
        elif a.dtype.kind in "iu":
            dt, b = "I64", a.astype("<i8").tobytes()
        else:
            raise ValueError(f"tensor {name!r}: unsupported dtype {a.dtype}")
        header[name] = {"dtype": dt, "shape": [int(d) for d in a.shape], "data_offsets": [pos, pos + len(b)]}
        chunks.append(b)
        pos += len(b)
    hjson = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hjson)))
        fh.write(hjson)
        for b in chunks:
            fh.write(b)
