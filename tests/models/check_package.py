#!/usr/bin/env python3
"""The models package (models/pyproject.toml) as the Python tests see it: every package it lists imports
under this interpreter (ctest: the checkout's .venv/bin/python, tests/CMakeLists.txt) and comes from
THIS checkout's models/. An editable install made from another checkout would test other code; ctest runs
this first (fixture rnntd_models_package) and the suites of tests/models and tests/train only after it.
Exits 77 (skipped) where neither the package nor torch is there: the suites skip there too."""
import importlib
import importlib.util
import os
import sys
import tomllib

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODELS = os.path.join(ROOT, "models")

with open(os.path.join(MODELS, "pyproject.toml"), "rb") as f:
    packages = tomllib.load(f)["tool"]["setuptools"]["packages"]
for pkg in packages:
    try:
        where = os.path.realpath(os.path.dirname(importlib.import_module(pkg).__file__))
    except ImportError as e:
        if importlib.util.find_spec("torch") is None:   # the suites skip there too (run_tests.py)
            print("skipped: %s, and no torch for %s" % (e, sys.executable))
            sys.exit(77)
        sys.exit("%s: the models package is not installed for %s; run deploy/install-deps.sh --test "
                 "(models/README.md, 'Installing the Python package')" % (e, sys.executable))
    if not where.startswith(MODELS + os.sep):
        sys.exit("%s comes from %s, not from this checkout (%s); run deploy/install-deps.sh --test here"
                 % (pkg, where, ROOT))
    print("%s: %s" % (pkg, where))
