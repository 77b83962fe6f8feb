#!/usr/bin/env python3
"""Run the training-code tests (unittest); exit 77 (ctest: skipped) when torch/numpy/yaml are missing."""
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

here = os.path.dirname(os.path.abspath(__file__))
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py", top_level_dir=here)
res = unittest.TextTestRunner(verbosity=2).run(suite)
print("%d passed, %d failed, %d skipped" % (res.testsRun - len(res.failures) - len(res.errors) - len(res.skipped),
                                              len(res.failures) + len(res.errors), len(res.skipped)))
sys.exit(0 if res.wasSuccessful() else 1)
