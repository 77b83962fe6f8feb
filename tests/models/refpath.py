"""Puts models/ on sys.path (for `import rnntd_ref`) and pins torch to one thread (tests run side by side)."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODELS = os.path.join(ROOT, "models")
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
if MODELS not in sys.path:
    sys.path.insert(0, MODELS)

import torch  # noqa: E402

torch.set_num_threads(1)
