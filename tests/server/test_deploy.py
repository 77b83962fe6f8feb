"""What ships beside the binary: the systemd unit (systemd-analyze verify), the install script (into a
staging root), and the OpenAPI file (every route, status and error code the server uses is in it)."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import BIN, MODEL, SLOW

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
UNIT = os.path.join(SRC, "deploy", "rnntd.service")
BUILD = os.environ.get("RNNTD_BUILD_DIR", "")


def read(p):
    with open(p) as f:
        return f.read()


class Unit(unittest.TestCase):
    def test_unit_settings(self):
        u = read(UNIT)
        for line in ("Type=notify", "NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes",
                     "ProtectHome=yes", "User=rnntd", "Restart=on-failure", "ExecReload=/bin/kill -HUP $MAINPID",
                     "CapabilityBoundingSet=", "SystemCallFilter=@system-service",
                     "ExecStart=/usr/local/bin/rnntd --config /etc/rnntd/rnntd.yaml"):
            self.assertRegex(u, r"(?m)^%s$" % re.escape(line))
        stop = int(re.search(r"(?m)^TimeoutStopSec=(\d+)$", u).group(1))
        drain = int(re.search(r"(?m)^  drain_timeout_s: (\d+)$", read(os.path.join(SRC, "conf", "rnntd.yaml"))).group(1))
        self.assertGreater(stop, drain)

    def verify(self, text):
        tmp = tempfile.mkdtemp(prefix="rnntd-unit-")
        try:
            p = os.path.join(tmp, "rnntd.service")
            with open(p, "w") as f:
                f.write(text)
            r = subprocess.run(["systemd-analyze", "verify", "--man=no", p], capture_output=True, text=True,
                               timeout=60)
            return r.returncode, (r.stdout + r.stderr).strip()
        finally:
            shutil.rmtree(tmp)

    @unittest.skipUnless(shutil.which("systemd-analyze"), "systemd-analyze not available")
    def test_systemd_analyze_verify(self):
        # verify checks that ExecStart exists: point it at the binary just built.
        u = read(UNIT).replace("/usr/local/bin/rnntd", os.path.abspath(BIN))
        rc, out = self.verify(u)
        self.assertEqual((rc, out), (0, ""))
        # The check can fail: a broken copy is reported.
        rc, out = self.verify(u.replace("Type=notify", "Type=notifyy").replace("PrivateTmp=yes", "PrivateTmpp=yes"))
        self.assertIn("notifyy", out)
        self.assertIn("PrivateTmpp", out)


class Install(unittest.TestCase):
    @unittest.skipUnless(BUILD and MODEL, "needs RNNTD_BUILD_DIR and a model")
    def test_install_into_staging_root(self):
        root = tempfile.mkdtemp(prefix="rnntd-root-")
        try:
            cmd = [os.path.join(SRC, "deploy", "install.sh"), "--build-dir", BUILD, "--prefix", "/opt/rnntd",
                   "--model", MODEL, "--destdir", root]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120 * SLOW)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for f in ("opt/rnntd/bin/rnntd", "opt/rnntd/share/rnntd/openapi.yaml", "opt/rnntd/share/rnntd/rnntd.yaml",
                      "opt/rnntd/share/rnntd/model/model.yaml", "opt/rnntd/share/rnntd/model/weights.safetensors",
                      "opt/rnntd/share/rnntd/model/tokens.txt", "etc/rnntd/rnntd.yaml",
                      "etc/systemd/system/rnntd.service"):
                self.assertTrue(os.path.isfile(os.path.join(root, f)), f)
            conf = read(os.path.join(root, "etc/rnntd/rnntd.yaml"))
            self.assertIn('  path: "/opt/rnntd/share/rnntd/model"\n', conf)
            unit = read(os.path.join(root, "etc/systemd/system/rnntd.service"))
            self.assertIn("ExecStart=/opt/rnntd/bin/rnntd --config /etc/rnntd/rnntd.yaml", unit)
            # The staged binary accepts the staged config and serves the staged model.
            staged = os.path.join(root, "opt/rnntd/bin/rnntd")
            r = subprocess.run([staged, "--check-config", "--config", os.path.join(root, "etc/rnntd/rnntd.yaml"),
                                "--model", os.path.join(root, "opt/rnntd/share/rnntd/model")],
                               capture_output=True, text=True, timeout=30 * SLOW)
            self.assertEqual(r.returncode, 0, r.stderr)
            # A second run keeps an edited configuration.
            with open(os.path.join(root, "etc/rnntd/rnntd.yaml"), "a") as f:
                f.write("# edited\n")
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120 * SLOW)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("kept the existing", r.stdout)
            self.assertTrue(read(os.path.join(root, "etc/rnntd/rnntd.yaml")).endswith("# edited\n"))
        finally:
            shutil.rmtree(root, ignore_errors=True)


class OpenApi(unittest.TestCase):
    def test_spec_covers_the_server(self):
        spec = read(os.path.join(SRC, "server", "openapi.yaml"))
        code = "".join(read(os.path.join(SRC, "server", f)) for f in os.listdir(os.path.join(SRC, "server"))
                       if f.endswith(".c"))
        # Every error code the server can send is listed in the Error schema's enum.
        used = set(re.findall(r'(?:srv_err_set\([^,]+|send_error\(r), (\d{3}), "([a-z_]+)"', code))
        # The transport's own answers (http_parse.c, transport.c): fail(err, NNN, "code"...) and
        # hp_error e = {NNN, "code"...}.
        used |= set(re.findall(r'(?:fail\(err, |hp_error e = \{)(\d{3}), "([a-z_]+)"', code))
        # The WebSocket upgrade's refusals (streams.c, strm_upgrade: *code = "..." or a choice of two),
        # documented under /v1/stream.
        upgrade = {c for stmt in re.findall(r'(?m)^\s+\*code = ([^;]+);', code) for c in re.findall(r'"([a-z_]+)"', stmt)}
        self.assertGreater(len(used), 15)
        enum = re.search(r"enum: \[(invalid_request[^\]]+)\]", spec).group(1)
        listed = {c.strip() for c in enum.split(",")}
        for c in {c for _, c in used} | upgrade:
            self.assertIn(c, listed, "error code %s missing from openapi.yaml" % c)
        self.assertEqual(listed, {c for _, c in used} | upgrade, "openapi.yaml lists codes the server never sends")
        # Every status of /v1/transcribe appears under its responses.
        tr = spec[spec.index("  /v1/transcribe:"):spec.index("  /health:")]
        for status, c in used:
            if status not in ("404",):
                self.assertIn("'%s':" % status, tr, "status %s (%s) not documented" % (status, c))
        # Every route the server answers is a path in the spec (the routes table in routes.c: exact
        # paths; the {name} patterns and the /v2/* catch-all are not plain paths).
        routes = set(re.findall(r'\{"(/[a-z0-9/]+)", (?:M_|GETS)', code))
        self.assertEqual(routes, set(re.findall(r"(?m)^  (/[a-z0-9/]+):$", spec)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
