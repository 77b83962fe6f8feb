#!/usr/bin/env python3
"""Run the training-code tests (unittest); exit 77 (ctest: skipped) when torch/numpy/yaml are missing."""
import importlib
import os
import sys
import unittest

try:
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import yaml  # noqa: F401
except ImportError as e:
    print("tests/train: skipped, %s (needs python3-torch, python3-numpy, python3-yaml)" % e)
    sys.exit(77)

# The code under test is the models package (models/pyproject.toml) of THIS checkout: ctest runs the
# checkout's .venv/bin/python, where deploy/install-deps.sh --test installed it (editable); a package
# found elsewhere would test other code.
ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
for pkg in ("rnntd_ref", "rnntd_train", "rnntd_corpus", "rnntd_eval"):
    try:
        where = os.path.realpath(os.path.dirname(importlib.import_module(pkg).__file__))
    except ImportError as e:
        sys.exit("%s: %s: the models package is not installed for %s; run deploy/install-deps.sh --test "
                 "(models/README.md, 'Installing the Python package')" % (__file__, e, sys.executable))
    if not where.startswith(os.path.join(ROOT, "models") + os.sep):
        sys.exit("%s: %s comes from %s, not from this checkout (%s); run deploy/install-deps.sh --test here"
                 % (__file__, pkg, where, ROOT))

here = os.path.dirname(os.path.abspath(__file__))
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py", top_level_dir=here)
res = unittest.TextTestRunner(verbosity=2).run(suite)
print("%d passed, %d failed, %d skipped" % (res.testsRun - len(res.failures) - len(res.errors) - len(res.skipped),
                                              len(res.failures) + len(res.errors), len(res.skipped)))
sys.exit(0 if res.wasSuccessful() else 1)
