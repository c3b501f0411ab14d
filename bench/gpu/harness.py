"""Runs the workloads on one GPU three ways (accel recipe under accel-run,
plain PyTorch, Hugging Face Accelerate), each in one process, and prints a
markdown table; see bench/gpu/README.md.
    python3 bench/gpu/harness.py --build build-cuda [--repeats N] [--only NAME ...]
                                 [--device cuda|cpu] [--timeout S] [--output FILE]

Per workload and version (median over --repeats launches, the versions
interleaved): samples/s, the median of the timed windows after the warm-up
steps; the loss, the mean over the last window; the peak of the GPU
allocator (torch.cuda.max_memory_allocated, accel.cuda.max_memory_allocated).
Each launch prints one BENCH line (the format of bench/python/harness.py).
A launch that fails or runs past --timeout is reported in its row; the others
go on, so that one short run on a lent machine still gives a table.
"""
import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = os.path.join(ROOT, "bench/python")

# program, environment, (warm-up steps, steps per window, windows): windows of
# about 1 s on an H100, so that all rows together take a few minutes.
WORKLOADS = {
    "digits-mlp": ("digits_mlp", {}, (100, 1000, 3)),
    "cnn": ("cnn", {}, (50, 600, 3)),
    "char-lm": ("char_lm", {"ACCEL_BENCH_CHARLM": "small"}, (20, 200, 3)),
    "char-lm-large": ("char_lm", {"ACCEL_BENCH_CHARLM": "large"}, (3, 5, 3)),
}
VERSIONS = ("accel", "PyTorch", "Accelerate")
# Rows beyond the three versions: accel with an Accelerator option the
# workload reads from the environment (bench/workloads/char_lm.lua), compared
# with the same PyTorch and Accelerate rows (float32 eager).
EXTRA = {
    "char-lm": (("accel, cuda_graphs", {"ACCEL_BENCH_CUDA_GRAPHS": "1"}),),
    "char-lm-large": (("accel, cuda_graphs", {"ACCEL_BENCH_CUDA_GRAPHS": "1"}),
                      ("accel, bf16", {"ACCEL_BENCH_PRECISION": "bf16"}),
                      ("accel, fp8", {"ACCEL_BENCH_PRECISION": "fp8"})),
}


def versions(name):
    """The rows of a workload: the three versions, then its extra accel rows."""
    return VERSIONS + tuple(label for label, _ in EXTRA.get(name, ()))
DIGITS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"

# What the header says of the Python side, asked in a child process so that
# the harness holds no GPU context while the workloads run.
INFO = """import json, torch
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": gpu}))"""


def command(version, program, loop, build):
    loop = [str(v) for v in loop]
    if version.startswith("accel"):
        return [os.path.join(build, "accel-run"), os.path.join(ROOT, "bench/workloads", program + ".lua"),
                "--nproc", "1", "--threads", "1", "--"] + loop
    if version == "PyTorch":
        return [sys.executable, os.path.join(PYTHON, program + ".py")] + loop
    return [sys.executable, os.path.join(PYTHON, "accelerate_run.py"), program] + loop


def digits_csv():
    """Debian's scikit-learn's digits, else those of the scikit-learn this Python imports (pip's)."""
    sklearn = None if os.path.exists(DIGITS) else importlib.util.find_spec("sklearn")
    return os.path.join(os.path.dirname(sklearn.origin), "datasets/data/digits.csv.gz") if sklearn else DIGITS


def environment(device, extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", ACCEL_BENCH_DEVICE=device, **extra)
    env.setdefault("ACCEL_BENCH_DIGITS", digits_csv())
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # accel picks a visible GPU by itself: hide them
    return env


def launch(cmd, env, timeout, tag):
    """Runs cmd; returns (its BENCH report, None) or (None, why there is none)."""
    # Its own process group, so that a timeout also ends the ranks accel-run started.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, f"timed out ({timeout:.0f} s)"
    reports = [json.loads(line[line.index("BENCH ") + 6:]) for line in out.splitlines() if "BENCH {" in line]
    if proc.returncode == 0 and len(reports) == 1:
        return reports[0], None
    print(f"harness: {tag} failed (exit {proc.returncode}): {' '.join(cmd)}\n{out[-2000:]}\n{err[-2000:]}",
          file=sys.stderr, flush=True)
    return None, f"failed (exit {proc.returncode})"


def run_workloads(args, accelerate):
    runs, notes = {}, {}  # (workload, version) -> list of per-launch reports / why there are none
    for repeat in range(args.repeats):
        for name, (program, extra, loop) in WORKLOADS.items():
            if args.only and name not in args.only:
                continue
            for version in versions(name):
                if version == "Accelerate" and not accelerate:
                    notes[(name, version)] = "not installed"
                    continue
                tag = f"{name} {version}, run {repeat + 1}"
                print(f"harness: {tag}", file=sys.stderr, flush=True)
                start = time.monotonic()
                option = dict(EXTRA.get(name, ())).get(version, {})
                report, note = launch(command(version, program, loop, args.build),
                                      environment(args.device, {**extra, **option}), args.timeout, tag)
                print(f"harness: {tag}: {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
                if report:
                    report["sps"] = statistics.median(report["windows"])
                    runs.setdefault((name, version), []).append(report)
                else:
                    notes[(name, version)] = note
    return runs, notes


def rate(v):
    return f"{v / 1000:.1f}k" if v >= 10000 else f"{v:.0f}"


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def checkout():
    """The commit of this checkout, which the build is presumably of."""
    try:
        git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:  # no git
        return "unknown"
    return git.stdout.strip() if git.returncode == 0 else "unknown"


def markdown(args, info, accelerate, runs, notes):
    lines = []
    add = lines.append
    add(f"Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}  ")
    machine = info["gpu"] if args.device == "cuda" else f"CPU only, {cpu_model()}"
    add(f"Machine: {machine}; {os.cpu_count()} CPUs, Linux {platform.release()}  ")
    add(f"Versions: torch {info['torch']} (CUDA {info['cuda']}), accelerate {accelerate or 'not installed'}, "
        f"accel: checkout {checkout()}, {os.path.join(args.build, 'accel-run')}  ")
    add(f"Command: `{' '.join(['python3', 'bench/gpu/harness.py'] + sys.argv[1:])}` ({args.repeats} launch(es) "
        "of each row, one process each)")
    add("")
    add("| workload | version | device | samples/s (median, ± half the range of windows) | accel/PyTorch "
        "| accel/Accelerate | loss | peak GPU MiB |")
    add("|---|---|---|---|---|---|---|---|")
    for name in WORKLOADS:
        if args.only and name not in args.only:
            continue
        sps = {v: statistics.median(r["sps"] for r in runs[(name, v)]) for v in versions(name) if (name, v) in runs}
        for version in versions(name):
            ratios = ["", ""]
            if version.startswith("accel") and version in sps:
                ratios = [f"{sps[version] / sps[v]:.2f}" if v in sps else "–" for v in ("PyTorch", "Accelerate")]
            if (name, version) not in runs:
                add(f"| {name} | {version} | | {notes[(name, version)]} | {' | '.join(ratios)} | | |")
                continue
            r = runs[(name, version)]
            windows = [w for report in r for w in report["windows"]]
            spread = (max(windows) - min(windows)) / 2 / sps[version] * 100
            gpu = statistics.median(report.get("gpu_mib", 0) for report in r)
            add(f"| {name} | {version} | {r[0]['device']} | {rate(sps[version])} ±{spread:.0f}% "
                f"| {' | '.join(ratios)} | {r[0]['loss']:.4g} | {f'{gpu:.0f}' if gpu else '–'} |")
    add("")
    steps = ", ".join(f"{name} {l[0]} + {l[2]} x {l[1]}" for name, (_, _, l) in WORKLOADS.items())
    add(f"Steps per launch (warm-up + windows x steps): {steps}. A char-lm sample is one window of characters "
        "(64, or 256 in char-lm-large). The loss is the mean over the last window of the first launch; peak GPU "
        "MiB is the allocator's peak of tensor memory (max_memory_allocated), without the CUDA context and the "
        "allocator's cache. Rows 'accel, X' run the accel recipe with the Accelerator option X (cuda_graphs, "
        "mixed_precision bf16 or fp8); their ratios are against the float32 eager PyTorch and Accelerate rows.")
    add("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the build folder holding accel-run")
    parser.add_argument("--repeats", type=int, default=1, help="launches of each row (default 1)")
    parser.add_argument("--only", action="append", choices=list(WORKLOADS), help="run only this workload")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where all versions run")
    parser.add_argument("--timeout", type=float, default=60, help="seconds one launch may take (default 60)")
    parser.add_argument("--output", help="also write the markdown to this file")
    args = parser.parse_args()

    if not os.access(os.path.join(args.build, "accel-run"), os.X_OK):
        sys.exit(f"harness: no accel-run in {args.build}")
    probe = subprocess.run([sys.executable, "-c", INFO], capture_output=True, text=True,
                           env=environment(args.device, {}))
    if probe.returncode != 0:
        sys.exit(f"harness: {sys.executable} cannot import torch:\n{probe.stderr}")
    info = json.loads(probe.stdout)
    if args.device == "cuda" and not info["gpu"]:
        sys.exit("harness: torch sees no GPU; --device cpu runs everything on the CPU")
    accelerate = importlib.util.find_spec("accelerate") and importlib.metadata.version("accelerate")

    runs, notes = run_workloads(args, accelerate)
    text = markdown(args, info, accelerate, runs, notes)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    with results.published("bench/gpu", "GPU benchmark: accel against PyTorch on CUDA"):
        main()
