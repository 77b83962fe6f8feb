"""A Dockerfile reader, and a runner that executes a Dockerfile's steps without Docker.

Reading: instructions with their line numbers, continuation lines joined, comments dropped, grouped
into stages (FROM ... [AS name]); ARG/ENV values substituted as Docker does (${VAR}, $VAR).

Running (run_stage): each instruction of a stage in a scratch directory, as Docker would inside the
image, with the path ARGs pointed at scratch directories (the Dockerfiles route every path they write
through ARGs for this reason). Package steps are not executed (no root filesystem to install into):
RUN lines made only of apt-get update / apt-get install / rm -rf /var/lib/apt/lists/* / useradd are
recorded (packages, users) for the caller to check; any other RUN line runs with /bin/sh -c. COPY
from the context or from an earlier stage's directory copies files. Unknown instructions fail.
"""
import fnmatch
import os
import re
import shlex
import shutil
import subprocess


class DockerfileError(Exception):
    pass


def read_instructions(path):
    """[(lineno, INSTRUCTION, argument text)] of a Dockerfile."""
    out = []
    with open(path) as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        start = i + 1
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        text = line
        while text.rstrip().endswith("\\"):
            text = text.rstrip()[:-1]
            # Comment lines inside a continued instruction are dropped, as Docker does.
            while i < len(lines) and lines[i].lstrip().startswith("#"):
                i += 1
            if i >= len(lines):
                raise DockerfileError("%s:%d: continuation at the end of the file" % (path, start))
            text += lines[i]  # Docker removes the backslash and the newline, nothing else
            i += 1
        m = re.match(r"\s*([A-Za-z]+)\s+(.*)$", text)
        if not m:
            raise DockerfileError("%s:%d: not an instruction: %s" % (path, start, text))
        out.append((start, m.group(1).upper(), m.group(2).strip()))
    return out


def substitute(text, values):
    """${VAR}, ${VAR:-default} and $VAR from values; unknown variables become empty (as in Docker)."""
    def rep(m):
        name = m.group(1) or m.group(3)
        default = m.group(2)
        v = values.get(name)
        return v if v else (default or "")
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)", rep, text)


class Stage:
    def __init__(self, base, name, index):
        self.base, self.name, self.index = base, name, index
        self.instructions = []  # (lineno, INSTR, args) within this stage

    def all(self, instr):
        return [(n, a) for n, i, a in self.instructions if i == instr]

    def last(self, instr):
        found = self.all(instr)
        return found[-1][1] if found else None


def read_stages(path):
    """(global ARGs {name: default}, [Stage]) of a Dockerfile."""
    global_args = {}
    stages = []
    for n, instr, args in read_instructions(path):
        if instr == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", args, re.I)
            if not m:
                raise DockerfileError("%s:%d: FROM %s" % (path, n, args))
            stages.append(Stage(substitute(m.group(1), global_args), m.group(2), len(stages)))
        elif not stages:
            if instr != "ARG":
                raise DockerfileError("%s:%d: %s before the first FROM" % (path, n, instr))
            k, _, v = args.partition("=")
            global_args[k] = v.strip('"')
        else:
            stages[-1].instructions.append((n, instr, args))
    return global_args, stages


def exec_form(args):
    """The list of a JSON-array (exec form) argument, or None for the shell form."""
    import json
    if args.startswith("["):
        return json.loads(args)
    return None


def apt_packages(run_text):
    """Packages named by the apt-get install commands of a RUN line."""
    pkgs = []
    for part in re.split(r"&&|;", run_text):
        words = shlex.split(part)
        if len(words) >= 2 and words[0] == "apt-get" and "install" in words:
            pkgs += [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
    return pkgs


PACKAGE_STEP = re.compile(r"^(apt-get update|apt-get install .*|rm -rf /var/lib/apt/lists/\*|useradd .*)$")


def is_package_step(run_text):
    parts = [p.strip() for p in run_text.split("&&")]
    return all(PACKAGE_STEP.match(p) for p in parts)


def dockerignore_patterns(path):
    pats = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    pats.append(line.rstrip("/"))
    return pats


def ignored(relpath, patterns):
    parts = relpath.split("/")
    for p in patterns:
        p2 = p[3:] if p.startswith("**/") else p
        for k in range(1, len(parts) + 1):
            prefix = "/".join(parts[:k])
            if fnmatch.fnmatchcase(prefix, p) or (p.startswith("**/") and fnmatch.fnmatchcase(parts[k - 1], p2)):
                return True
    return False


def build_context(src, dest, ignore_file):
    """Copies the files git knows of (tracked and new, not ignored) minus the .dockerignore patterns."""
    r = subprocess.run(["git", "-C", src, "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        raise DockerfileError("git ls-files failed: " + r.stderr.decode())
    pats = dockerignore_patterns(ignore_file)
    n = 0
    for rel in r.stdout.decode().split("\0"):
        if not rel or ignored(rel, pats) or not os.path.lexists(os.path.join(src, rel)):
            continue
        d = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy2(os.path.join(src, rel), d, follow_symlinks=False)
        n += 1
    return n


def mapped(path, root, values):
    """Where a stage's absolute path lies here: paths routed through an ARG (already a scratch path)
    stay, any other absolute path is taken under the stage's root directory."""
    if any(v and os.path.isabs(v) and (path == v or path.startswith(v.rstrip("/") + "/")) for v in values.values()):
        return path
    return os.path.join(root, path.lstrip("/"))


def copy_tree(src, dst):
    if os.path.isdir(src):
        shutil.copytree(src, dst, dirs_exist_ok=True, symlinks=True)
    elif dst.endswith("/"):
        os.makedirs(dst, exist_ok=True)
        shutil.copy2(src, dst)
    else:
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        shutil.copy2(src, dst)


class StageRun:
    """What running a stage recorded: packages, users, final settings, and the directories used."""

    def __init__(self):
        self.packages, self.useradds, self.runs = [], [], []
        self.env, self.user, self.workdir = {}, None, "/"
        self.expose, self.healthcheck, self.entrypoint, self.cmd, self.stopsignal = [], None, None, None, None


def run_stage(stage, values, context, root, stage_dirs, log, env_extra=None, timeout=1800):
    """Executes a stage. values: ARG values to use (scratch paths); context: the build context;
    root: the directory standing for the stage's "/" (WORKDIR and COPY destinations that are not
    ARG-routed land under it); stage_dirs: {stage name: its root} for COPY --from."""
    res = StageRun()
    vals = dict(values)
    for n, instr, args in stage.instructions:
        where = "line %d: %s %s" % (n, instr, args[:80])
        if instr == "ARG":
            k, _, v = args.partition("=")
            vals.setdefault(k, v.strip('"'))
        elif instr == "ENV":
            k, _, v = args.partition("=")
            res.env[k] = substitute(v, vals)
            vals[k] = res.env[k]
        elif instr == "WORKDIR":
            res.workdir = mapped(substitute(args, vals), root, values)
            os.makedirs(res.workdir, exist_ok=True)
        elif instr == "COPY":
            words = shlex.split(args)
            frm = None
            for o in [w for w in words if w.startswith("--")]:
                if o.startswith("--from="):
                    frm = o[len("--from="):]
                elif not o.startswith(("--chown=", "--chmod=", "--link")):
                    raise DockerfileError(where + ": unknown COPY option " + o)
            words = [w for w in words if not w.startswith("--")]
            srcs, dst = [substitute(w, vals) for w in words[:-1]], substitute(words[-1], vals)
            dst = mapped(dst if dst.startswith("/") else os.path.join(res.workdir, dst), root, values)
            for s in srcs:
                if frm:
                    if frm not in stage_dirs:
                        raise DockerfileError(where + ": no stage " + frm)
                    src = mapped(s, stage_dirs[frm], values)
                else:
                    src = os.path.normpath(os.path.join(context, s))
                    if not src.startswith(os.path.normpath(context)):
                        raise DockerfileError(where + ": source outside the context")
                copy_tree(src, dst)
        elif instr == "RUN":
            if args.startswith("["):
                raise DockerfileError(where + ": exec-form RUN is not handled")
            if is_package_step(args):
                res.packages += apt_packages(args)
                res.useradds += [p.strip() for p in args.split("&&") if p.strip().startswith("useradd")]
                continue
            env = dict(os.environ)
            env.update(vals)
            env.update(env_extra or {})
            log.write("== %s (cwd %s)\n" % (where, res.workdir))
            log.flush()
            r = subprocess.run(["/bin/sh", "-c", args], cwd=res.workdir, env=env, stdout=log,
                               stderr=subprocess.STDOUT, timeout=timeout)
            res.runs.append(args)
            if r.returncode != 0:
                raise DockerfileError("%s: exit status %d (log: %s)" % (where, r.returncode, log.name))
        elif instr == "USER":
            res.user = args
        elif instr == "EXPOSE":
            res.expose += args.split()
        elif instr == "HEALTHCHECK":
            res.healthcheck = args
        elif instr == "ENTRYPOINT":
            res.entrypoint = exec_form(args)
        elif instr == "CMD":
            res.cmd = exec_form(args)
        elif instr == "STOPSIGNAL":
            res.stopsignal = args
        elif instr in ("LABEL",):
            pass
        else:
            raise DockerfileError(where + ": instruction not handled by the runner")
    return res
