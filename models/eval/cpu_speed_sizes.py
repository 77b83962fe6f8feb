"""How large a model can stay the CPU default (issue 15: >= 50x real time on one core of this machine)?

Writes random models of the given encoder shapes (rnntd_ref.random_model, hard LSTMs, output biases
calibrated to a label rate like the trained character model's), then decodes the same feature files with
each, and with a trained model for reference, through `rnnt-transcribe --threads 1 --batch 1 --timing`,
alternating the models round by round; prints the median real-time factor (audio s / decode s) per model
and where the time goes. Random weights emit a different number of labels than a trained model, so the
predictor and joint shares are a proxy; the encoder's work, most of the time, depends on the shape only.

    python3 -m rnntd_eval.cpu_speed_sizes --cli build-train/engine/rnnt-transcribe \
        --reference models/en-char-small [--reference DIR ...] --files .corpus/eval/npy-test-clean/u00000[0-4]*.npy --rounds 3 \
        --shape 4x288 --shape 4x512 --shape 5x640 --shape 5x1024
(pin it to one core with taskset -c N; a shape is LAYERSxHIDDEN, time stacking 2 after layer 1 for 4
layers and after layer 2 for 5, as the shipped model and MLPerf do; LAYERSxHIDDEN/sK/pP/jJ sets the layer
after which time stacking 2 comes (K, 1-based), the predictor's hidden size P and the joint's J, e.g.
5x512/s1/p320/j512, the shape issue 15's larger model was chosen by)
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import tempfile

from rnntd_ref.io import save_model
from rnntd_ref.random_model import build_config, default_tokens, random_model

LINE = re.compile(r"([\d.]+) s audio in ([\d.]+) s \(RTFx [\d.]+\): encoder ([\d.]+), predictor ([\d.]+), "
                  r"joint ([\d.]+)")


def shape_config(spec, label_rate):
    base, *opts = spec.lower().split("/")
    n, h = (int(v) for v in base.split("x"))
    stack_after = 1 if n <= 4 else 2
    pred = 256 if h <= 320 else 320
    joint = min(512, max(256, h))
    for o in opts:
        key, val = o[0], int(o[1:])
        if key == "s":
            stack_after = val
        elif key == "p":
            pred = val
        elif key == "j":
            joint = val
        else:
            raise SystemExit("shape %s: unknown option %s (sK, pP, jJ)" % (spec, o))
    stacks = [1] * n
    stacks[stack_after - 1] = 2
    return build_config(name="speed-%s" % spec.replace("/", "-"), feature_dim=80, frame_stacking=3,
                        encoder_hidden=[h] * n,
                        time_stacks=stacks, embedding=128, predictor_hidden=[pred], joint_dim=joint,
                        joint_activation="relu", vocab_size=28, big_blank_durations=[2, 4, 8], max_symbols=10)


def run(cli, model, files):
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([cli, "--model", model, "--threads", "1", "--batch", "1", "--backend", "cpu", "--timing"]
                       + files, capture_output=True, text=True, check=True)
    m = LINE.search(p.stderr)
    if not m:
        raise RuntimeError("no timing line in: " + p.stderr[-300:])
    audio, total, enc, pred, joint = (float(v) for v in m.groups())
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
    return audio, total, enc, pred, joint, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--reference", action="append", default=[],
                    help="a trained model directory to time beside the random ones (repeatable)")
    ap.add_argument("--files", nargs="+", required=True)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--label-rate", type=float, default=0.3, help="labels per encoder frame (random models)")
    a = ap.parse_args()
    models = {}
    tmp = tempfile.TemporaryDirectory()
    for r in a.reference:
        models["trained " + os.path.basename(os.path.normpath(r))] = r
    for s in a.shape:
        cfg = shape_config(s, a.label_rate)
        model, _ = random_model(cfg, seed=1, label_rate=a.label_rate, calib_utts=16)
        d = os.path.join(tmp.name, s.replace("/", "-"))
        save_model(model, default_tokens(cfg.vocab_size), d, dtype="F16")
        n = sum(p.numel() for p in model.parameters())
        models["random %s (%.1f M parameters)" % (s, n / 1e6)] = d
    times = {k: [] for k in models}
    for _ in range(a.rounds):
        for k, d in models.items():
            times[k].append(run(a.cli, d, a.files))
    print("| model | audio s | decode s (median of %d) | x real time | encoder s | x real time, encoder alone "
          "| predictor s | joint s | process CPU s (load, features, decode) | x real time, CPU time |" % a.rounds)
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, ts in times.items():
        med = sorted(ts, key=lambda t: t[1])[len(ts) // 2]
        cpu = statistics.median(t[5] for t in ts)
        print("| %s | %.1f | %.3f | %.0f | %.3f | %.0f | %.3f | %.3f | %.3f | %.0f |" % (
            k, med[0], med[1], med[0] / med[1], med[2], med[0] / med[2], med[3], med[4], cpu, med[0] / cpu))
    for k, ts in times.items():
        print("%s: decode s of every round: %s" % (k, ", ".join("%.3f" % t[1] for t in ts)))


if __name__ == "__main__":
    main()
