"""The Kubernetes manifests of deploy/k8s/ (and gpu/), offline.

- Every manifest validates (strict: unknown fields rejected) against the Kubernetes API schemas that
  the PyPI package kubernetes-validate ships, for the oldest and newest versions we name; a broken
  copy fails (so the check can fail).
- The ServiceMonitor (a CRD, for which those schemas have nothing) against our own JSON schema of the
  fields we use, written from the prometheus-operator CRD (monitoring.coreos.com/v1).
- Consistency with what rnntd really does: a daemon is started with the ConfigMap's configuration
  (model path, token file and address mapped to this machine; loopback only) and the Secret's token;
  the probes' paths answer 200 on the port the ConfigMap sets; /metrics (the ServiceMonitor's path)
  serves the metric the Prometheus adapter turns into the HPA's metric; /v1/* needs the token. The
  grace period covers preStop + server.drain_timeout_s, the drain equals conf/rnntd.yaml's, the memory
  limit exceeds limits.max_pending_bytes, the workers match the CPU request, the pod's user is the
  image's, and the selectors, names and ports line up.
PyYAML and jsonschema come with kubernetes-validate in deploy/install-deps.sh's virtual environment;
this file re-runs itself with that environment's Python when the current one lacks them.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
from pyenv import PYENV, tool

try:
    import jsonschema
    import yaml
except ImportError:
    py = os.path.join(PYENV, "bin", "python")
    if os.path.realpath(sys.executable) == os.path.realpath(py) or not os.access(py, os.X_OK):
        raise SystemExit("test_k8s: PyYAML and jsonschema not found in %s: run deploy/install-deps.sh" % PYENV)
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])

import glob  # noqa: E402
import http.client  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
K8S = os.path.join(SRC, "deploy", "k8s")
BIN = os.environ.get("RNNTD_BIN", os.path.join(SRC, "build", "server", "rnntd"))
MODEL = os.path.join(SRC, "models", "en-char-small")
VERSIONS = ("1.29.0", "1.37.0")
MANIFESTS = sorted(glob.glob(os.path.join(K8S, "*.yaml")) + glob.glob(os.path.join(K8S, "gpu", "*.yaml")))

# The ServiceMonitor fields deploy/k8s uses, with the types and patterns of prometheus-operator's CRD
# (monitoring.coreos.com/v1); anything else is rejected, so a typo cannot pass.
DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
SERVICEMONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name"], "additionalProperties": False,
                     "properties": {"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                                    "namespace": {"type": "string"}, "labels": LABELS}},
        "spec": {
            "type": "object", "required": ["selector", "endpoints"], "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "additionalProperties": False,
                             "properties": {"matchLabels": LABELS}},
                "jobLabel": {"type": "string"},
                "endpoints": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {"port": {"type": "string"}, "path": {"type": "string"},
                                   "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                                   "interval": {"type": "string", "pattern": DURATION},
                                   "scrapeTimeout": {"type": "string", "pattern": DURATION},
                                   "honorLabels": {"type": "boolean"}}}},
            }},
    },
}


def read_text(path):
    with open(path) as f:
        return f.read()


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(name):
    docs = load(os.path.join(K8S, name))
    assert len(docs) == 1, name
    return docs[0]


def validate(paths, version):
    r = subprocess.run([tool("kubernetes-validate"), "--strict", "-k", version] + paths, capture_output=True,
                       text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def duration_s(text):
    m = re.fullmatch(r"(\d+)s", text)
    return int(m.group(1))


def effective_config(conf_text):
    """rnntd's effective configuration of a config file's text (--print-config), and its check."""
    d = tempfile.mkdtemp(prefix="rnntd-k8s-conf-")
    try:
        p = os.path.join(d, "rnntd.yaml")
        with open(p, "w") as f:
            f.write(conf_text)
        out = subprocess.run([BIN, "--print-config", "--config", p], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return yaml.safe_load(out.stdout)
    finally:
        shutil.rmtree(d)


def container(dep):
    cs = dep["spec"]["template"]["spec"]["containers"]
    assert len(cs) == 1
    return cs[0]


class Schemas(unittest.TestCase):
    def test_kubernetes_schemas(self):
        plain = [p for p in MANIFESTS if load(p)[0]["kind"] != "ServiceMonitor"]
        self.assertGreaterEqual(len(plain), 8)
        for v in VERSIONS:
            rc, out = validate(plain, v)
            self.assertEqual(rc, 0, out)
            self.assertNotIn("Couldn't find schema", out)
            self.assertEqual(out.count(" passed for resource "), len(plain), out)

    def test_a_broken_manifest_fails(self):
        text = read_text(os.path.join(K8S, "deployment.yaml"))
        for broken, why in ((text.replace("livenessProbe:", "livenesProbe:"), "unknown field"),
                            (text.replace("periodSeconds: 10", 'periodSeconds: "ten"'), "wrong type"),
                            (text.replace("maxUnavailable: 0", "maxUnavailable: [0]"), "not an int-or-string")):
            d = tempfile.mkdtemp(prefix="rnntd-k8s-")
            try:
                p = os.path.join(d, "deployment.yaml")
                with open(p, "w") as f:
                    f.write(broken)
                rc, out = validate([p], VERSIONS[-1])
            finally:
                shutil.rmtree(d)
            self.assertNotEqual(rc, 0, why + ":\n" + out)

    def test_servicemonitor_schema(self):
        sm = one("servicemonitor.yaml")
        jsonschema.validate(sm, SERVICEMONITOR_SCHEMA)
        bad = yaml.safe_load(yaml.safe_dump(sm))
        bad["spec"]["endpoints"][0]["interval"] = "15 seconds"
        self.assertRaises(jsonschema.ValidationError, jsonschema.validate, bad, SERVICEMONITOR_SCHEMA)
        bad = yaml.safe_load(yaml.safe_dump(sm))
        bad["spec"]["endpoint"] = bad["spec"].pop("endpoints")
        self.assertRaises(jsonschema.ValidationError, jsonschema.validate, bad, SERVICEMONITOR_SCHEMA)


class Consistency(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cm = one("configmap.yaml")
        cls.dep = one("deployment.yaml")
        cls.gpu_cm = one(os.path.join("gpu", "configmap.yaml"))
        cls.gpu_dep = one(os.path.join("gpu", "deployment.yaml"))
        cls.svc, cls.pdb, cls.hpa = one("service.yaml"), one("pdb.yaml"), one("hpa.yaml")
        cls.sm, cls.secret = one("servicemonitor.yaml"), one("secret.yaml")
        cls.conf = effective_config(cls.cm["data"]["rnntd.yaml"])
        cls.gpu_conf = effective_config(cls.gpu_cm["data"]["rnntd.yaml"])
        cls.default = yaml.safe_load(subprocess.run(
            [BIN, "--print-config", "--config", os.path.join(SRC, "conf", "rnntd.yaml")],
            capture_output=True, text=True, timeout=30).stdout)

    def pairs(self):
        return ((self.dep, self.conf), (self.gpu_dep, self.gpu_conf))

    def test_drain_and_grace_period(self):
        for dep, conf in self.pairs():
            spec = dep["spec"]["template"]["spec"]
            c = container(dep)
            cmd = c["lifecycle"]["preStop"]["exec"]["command"]
            self.assertEqual(cmd[0], "/bin/sleep")
            pre = int(cmd[1])
            drain = conf["server"]["drain_timeout_s"]
            self.assertEqual(drain, self.default["server"]["drain_timeout_s"], "conf/rnntd.yaml's drain changed")
            # The grace period starts with preStop; the drain must end before SIGKILL, with a margin.
            self.assertGreaterEqual(spec["terminationGracePeriodSeconds"], pre + drain + 5)
            # Readiness notices a drain quickly; liveness does not kill a pod during one.
            r, lv = c["readinessProbe"], c["livenessProbe"]
            self.assertLessEqual(r["periodSeconds"] * r["failureThreshold"], 15)
            self.assertGreaterEqual(lv["periodSeconds"] * lv["failureThreshold"], 20)
            self.assertEqual(dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0)

    def test_resources_match_the_config(self):
        for dep, conf in self.pairs():
            res = container(dep)["resources"]
            mem = res["limits"]["memory"]
            m = re.fullmatch(r"(\d+)(Mi|Gi)", mem)
            limit = int(m.group(1)) << (20 if m.group(2) == "Mi" else 30)
            model = sum(os.path.getsize(os.path.join(MODEL, f)) for f in os.listdir(MODEL)
                        if os.path.isfile(os.path.join(MODEL, f)))
            self.assertGreater(limit, conf["limits"]["max_pending_bytes"] + model + (128 << 20), dep["metadata"])
            # A container sees all of its node's cores: workers are set, not derived from them.
            self.assertGreater(conf["batching"]["workers"], 0)
        self.assertEqual(int(container(self.dep)["resources"]["requests"]["cpu"]), self.conf["batching"]["workers"])
        gpu = container(self.gpu_dep)["resources"]
        self.assertEqual(gpu["limits"]["nvidia.com/gpu"], 1)
        self.assertEqual(self.gpu_conf["model"]["backend"], "cuda")
        self.assertEqual(container(self.gpu_dep)["image"], "rnntd:cuda")
        self.assertEqual(container(self.dep)["image"], "rnntd:cpu")

    def test_names_ports_and_selectors(self):
        labels = self.dep["spec"]["template"]["metadata"]["labels"]
        for dep, conf in self.pairs():
            c = container(dep)
            self.assertEqual(c["args"], ["--config", "/etc/rnntd/rnntd.yaml"])
            port = {p["name"]: p["containerPort"] for p in c["ports"]}["http"]
            self.assertEqual(port, conf["server"]["port"])
            self.assertEqual(conf["server"]["listen"], "0.0.0.0")
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                self.assertEqual(c[probe]["httpGet"]["port"], "http")
            mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
            self.assertEqual(os.path.join(mounts["config"], "rnntd.yaml"), "/etc/rnntd/rnntd.yaml")
            self.assertEqual(os.path.join(mounts["auth"], "token"), conf["server"]["auth_token_file"])
            vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
            self.assertEqual(vols["config"]["configMap"]["name"], self.cm["metadata"]["name"])
            self.assertEqual(vols["auth"]["secret"]["secretName"], self.secret["metadata"]["name"])
            self.assertIn("token", self.secret["stringData"])
            # The image's user (Dockerfile USER) is the pod's.
            sc = dep["spec"]["template"]["spec"]["securityContext"]
            flavour = "cuda" if "cuda" in c["image"] else "cpu"
            df = read_text(os.path.join(SRC, "deploy", "docker", "Dockerfile." + flavour))
            self.assertEqual(re.findall(r"(?m)^USER (\d+):(\d+)$", df)[-1], (str(sc["runAsUser"]), str(sc["runAsGroup"])))
            self.assertTrue(sc["runAsNonRoot"])
            self.assertEqual(conf["model"]["path"], "/usr/local/share/rnntd/model")  # where the images have it
            self.assertEqual(dep["spec"]["selector"]["matchLabels"], labels)
            self.assertEqual(dep["metadata"]["name"], self.hpa["spec"]["scaleTargetRef"]["name"])
        self.assertEqual(self.svc["spec"]["selector"], labels)
        self.assertEqual(self.pdb["spec"]["selector"]["matchLabels"], labels)
        self.assertEqual(self.sm["spec"]["selector"]["matchLabels"], self.svc["metadata"]["labels"])
        self.assertIn(self.sm["spec"]["endpoints"][0]["port"], [p["name"] for p in self.svc["spec"]["ports"]])
        self.assertEqual(self.svc["spec"]["ports"][0]["targetPort"], "http")
        # The HPA's metric is the adapter rule's output name, over a metric rnntd exports.
        with open(os.path.join(K8S, "prometheus-adapter", "config.yaml")) as f:
            rules = yaml.safe_load(f)["rules"]
        names = {r["name"]["as"]: r for r in rules}
        metric = self.hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
        self.assertIn(metric, names)
        series = re.match(r"^([a-z_]+)\{", names[metric]["seriesQuery"]).group(1)
        with open(os.path.join(SRC, "server", "metrics.c")) as f:
            self.assertIn('"%s"' % series, f.read())

    def test_against_a_running_daemon(self):
        """The ConfigMap's config and the Secret's token on a real daemon: probes, metrics, auth."""
        tmp = tempfile.mkdtemp(prefix="rnntd-k8s-")
        proc = None
        try:
            token = os.path.join(tmp, "token")
            with open(token, "w") as f:
                f.write(self.secret["stringData"]["token"] + "\n")
            os.chmod(token, 0o600)
            text = self.cm["data"]["rnntd.yaml"]
            text = text.replace('"/run/secrets/rnntd/token"', '"%s"' % token)
            text = text.replace('"/usr/local/share/rnntd/model"', '"%s"' % MODEL)
            conf = os.path.join(tmp, "rnntd.yaml")
            with open(conf, "w") as f:
                f.write(text)
            r = subprocess.run([BIN, "--check-config", "--config", conf], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            log = os.path.join(tmp, "log")
            t_start = time.monotonic()
            with open(log, "wb") as lf:
                # Loopback only, a free port: the ConfigMap's port is checked against the manifests above.
                proc = subprocess.Popen([BIN, "--config", conf, "--listen", "127.0.0.1", "--port", "0",
                                         "--backend", "cpu"], stdout=subprocess.DEVNULL, stderr=lf)
            port = None
            end = time.monotonic() + 30
            while time.monotonic() < end and proc.poll() is None and port is None:
                m = re.search(r"msg=listening address=\S+ port=(\d+)", read_text(log))
                port = int(m.group(1)) if m else None
                time.sleep(0.02)
            self.assertIsNotNone(port, read_text(log))

            def get(path, headers=None, body=None, method="GET"):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                try:
                    c.request(method, path, body=body, headers=headers or {})
                    resp = c.getresponse()
                    return resp.status, resp.read()
                finally:
                    c.close()

            c = container(self.dep)
            self.assertEqual(get(c["livenessProbe"]["httpGet"]["path"])[0], 200)
            end = time.monotonic() + 30
            while get(c["readinessProbe"]["httpGet"]["path"])[0] != 200 and time.monotonic() < end:
                time.sleep(0.05)
            self.assertEqual(get(c["readinessProbe"]["httpGet"]["path"])[0], 200)
            ready_s = time.monotonic() - t_start
            self.assertEqual(get(c["startupProbe"]["httpGet"]["path"])[0], 200)
            # Timings: ready well inside the startup probe's budget, probes answered well inside their
            # timeouts (the slowest of 20 GETs each).
            sp = c["startupProbe"]
            self.assertLess(ready_s * 4, sp["periodSeconds"] * sp["failureThreshold"])
            for probe in ("livenessProbe", "readinessProbe"):
                worst = 0.0
                for _ in range(20):
                    t = time.monotonic()
                    self.assertEqual(get(c[probe]["httpGet"]["path"])[0], 200)
                    worst = max(worst, time.monotonic() - t)
                self.assertLess(worst * 4, c[probe]["timeoutSeconds"], probe)
            print("ConfigMap's config on the shipped model: ready %.2f s after the start (startup budget %d s)"
                  % (ready_s, sp["periodSeconds"] * sp["failureThreshold"]))
            st, metrics = get(self.sm["spec"]["endpoints"][0]["path"])
            self.assertEqual(st, 200)
            self.assertRegex(metrics.decode(), r"(?m)^rnntd_queue_depth \d+$")
            self.assertRegex(metrics.decode(), r"(?m)^rnntd_workers %d$" % self.conf["batching"]["workers"])
            sample = sorted(glob.glob(os.path.join(MODEL, "samples", "*.npy")))[0]
            with open(sample, "rb") as f:
                body = f.read()
            h = {"Content-Type": "application/x-npy"}
            self.assertEqual(get("/v1/transcribe", h, body, "POST")[0], 401)
            h["Authorization"] = "Bearer " + self.secret["stringData"]["token"]
            self.assertEqual(get("/v1/transcribe", h, body, "POST")[0], 200)
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(self.conf["server"]["drain_timeout_s"] + 10), 0)
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
