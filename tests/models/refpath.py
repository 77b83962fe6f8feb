"""Where the tests' data is, and torch pinned to one thread (the tests run side by side). The reference
itself (rnntd_ref) comes from the models package of this checkout (models/pyproject.toml), installed
in the checkout's .venv by deploy/install-deps.sh --test; check_package.py checks that."""
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODELS = os.path.join(ROOT, "models")
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")

import torch  # noqa: E402

torch.set_num_threads(1)
