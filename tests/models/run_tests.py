#!/usr/bin/env python3
"""Run the reference's tests (unittest): all of them, or the modules named on the command line.
Exits 77 (ctest: skipped) when torch, numpy or yaml can not be imported."""
import os
import sys
import unittest

try:
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import yaml  # noqa: F401
except ImportError as e:
    print("tests/models: skipped, %s (needs python3-torch, python3-numpy, python3-yaml)" % e)
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
loader = unittest.defaultTestLoader
if len(sys.argv) > 1:
    suite = loader.loadTestsFromNames(sys.argv[1:])
else:
    suite = loader.discover(here, pattern="test_*.py", top_level_dir=here)
res = unittest.TextTestRunner(verbosity=2).run(suite)
print("%d passed, %d failed, %d skipped" % (res.testsRun - len(res.failures) - len(res.errors) - len(res.skipped),
                                              len(res.failures) + len(res.errors), len(res.skipped)))
sys.exit(0 if res.wasSuccessful() else 1)
