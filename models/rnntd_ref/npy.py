"""Minimal .npy (format 1.0) writer/reader for [T, F] feature files, byte-identical on every numpy version
(np.save's header text has changed between versions; the golden files must not)."""
import ast
import struct

import numpy as np

MAGIC = b"\x93NUMPY"


def save_npy(path, a):
    a = np.ascontiguousarray(a)
    if a.dtype not in (np.float32, np.float16):
        raise ValueError(f"save_npy writes float32 or float16, not {a.dtype}")
    descr = "<f4" if a.dtype == np.float32 else "<f2"
    shape = repr(tuple(int(d) for d in a.shape))
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    total = len(MAGIC) + 2 + 2 + len(header) + 1
    header += " " * (-total % 64) + "\n"
    with open(path, "wb") as fh:
        fh.write(MAGIC + b"\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        fh.write(a.astype(descr, copy=False).tobytes())


def load_npy(path):
    """Read a float32/float16 C-order .npy (what save_npy writes, and np.save of such arrays)."""
    with open(path, "rb") as fh:
        blob = fh.read()
    if blob[:6] != MAGIC or len(blob) < 10:
        raise ValueError(f"{path}: not a .npy file")
    major = blob[6]
    if major == 1:
        (hlen,), start = struct.unpack("<H", blob[8:10]), 10
    elif major in (2, 3):
        (hlen,), start = struct.unpack("<I", blob[8:12]), 12
    else:
        raise ValueError(f"{path}: unsupported .npy version {major}")
    header = ast.literal_eval(blob[start:start + hlen].decode("latin1"))
    if header.get("fortran_order"):
        raise ValueError(f"{path}: Fortran order is not supported")
    dt = np.dtype(header["descr"])
    shape = tuple(header["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    data = blob[start + hlen:]
    if len(data) != count * dt.itemsize:
        raise ValueError(f"{path}: {len(data)} data bytes, shape {shape} needs {count * dt.itemsize}")
    return np.frombuffer(data, dtype=dt, count=count).reshape(shape).astype(dt.newbyteorder("="))
