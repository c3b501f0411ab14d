"""Runs the three workloads three ways (accel recipe under accel-run, C++ on
LibTorch, Python DDP under torch.distributed.run) on 1 and 2 ranks, and the
gradient all-reduce comparison, and prints the results as markdown.
bench/run.sh builds what it needs and calls this; see bench/README.md.

Figures, per workload, version and number of ranks (median over --repeats
launches, the versions interleaved so that each sees the same machine):
  samples/s        all ranks together, the median of rank 0's timed windows
                   (after the warm-up steps) of a launch
  first step       from just before the launch command starts to the end of
                   rank 0's first step (CLOCK_MONOTONIC on both sides)
  rank RSS         the largest VmHWM of the ranks, read by each at its end
  launcher RSS     the launcher process's VmHWM, polled while it runs
  loss             rank 0's mean loss over the last window
"""
import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# warm-up steps, steps per window, windows: about 2 to 5 s of timed steps each.
WORKLOADS = {
    "digits-mlp": ("digits_mlp", (50, 200, 5)),
    "cnn": ("cnn", (20, 60, 5)),
    "char-lm": ("char_lm", (5, 12, 5)),
}
VERSIONS = ("accel", "C++", "Python")
LAUNCHERS = {"accel": "accel-run", "C++": "bench_launch", "Python": "torchrun"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(version, program, nproc, loop, build):
    loop = [str(v) for v in loop]
    if version == "accel":
        return [os.path.join(build, "accel-run"), os.path.join(ROOT, "bench/workloads", program + ".lua"),
                "--nproc", str(nproc), "--threads", "1", "--"] + loop
    if version == "C++":
        return [os.path.join(build, "bench/bench_launch"), "--nproc", str(nproc),
                os.path.join(build, "bench/bench_" + program)] + loop
    return ["/usr/bin/python3", os.path.join(HERE, "torchrun.py"), "--nproc_per_node", str(nproc),
            "--master_port", str(free_port()), os.path.join(HERE, program + ".py")] + loop


def vmhwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def launch(cmd, tag):
    """Runs cmd; returns (monotonic start, stdout, launcher VmHWM KiB)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    peak = [0]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)

    def poll():  # VmHWM only grows: the last reading before exit is the peak
        while proc.poll() is None:
            value = vmhwm_kib(proc.pid)
            if value:
                peak[0] = max(peak[0], value)
            time.sleep(0.005)

    poller = threading.Thread(target=poll)
    poller.start()
    out, err = proc.communicate()
    poller.join()
    if proc.returncode != 0:
        sys.exit(f"harness: {tag} failed (exit {proc.returncode}): {' '.join(cmd)}\n{out}\n{err}")
    return start, out, peak[0]


def bench_reports(out, nproc, tag):
    reports = [json.loads(line[line.index("BENCH ") + 6:]) for line in out.splitlines() if "BENCH {" in line]
    if sorted(r["rank"] for r in reports) != list(range(nproc)):
        sys.exit(f"harness: {tag}: expected a BENCH line from each of {nproc} ranks, got:\n{out}")
    return sorted(reports, key=lambda r: r["rank"])


def run_workloads(args):
    runs = {}  # (workload, nproc, version) -> list of per-launch figures
    for repeat in range(args.repeats):
        for name, (program, loop) in WORKLOADS.items():
            if args.only and name not in args.only:
                continue
            for nproc in (1, 2):
                for version in VERSIONS:
                    tag = f"{name} {version} {nproc} rank(s), run {repeat + 1}"
                    print(f"harness: {tag}", file=sys.stderr, flush=True)
                    start, out, launcher = launch(command(version, program, nproc, loop, args.build), tag)
                    reports = bench_reports(out, nproc, tag)
                    runs.setdefault((name, nproc, version), []).append({
                        "sps": statistics.median(reports[0]["windows"]),
                        "windows": reports[0]["windows"],
                        "first_step": reports[0]["first_step"] - start,
                        "rank_mib": max(r["vmhwm_kib"] for r in reports) / 1024,
                        "launcher_mib": launcher / 1024,
                        "loss": reports[0]["loss"],
                        "blas": sorted({r["blas"] for r in reports}),
                    })
    return runs


def allreduce(args):
    cmd = [os.path.join(args.build, "bench/bench_launch"), "--nproc", "2",
           os.path.join(args.build, "bench/bench_allreduce"), "20"]
    print("harness: gradient all-reduce, 2 ranks", file=sys.stderr, flush=True)
    _, out, _ = launch(cmd, "bench_allreduce")
    return [json.loads(line[line.index("{"):]) for line in out.splitlines() if line.startswith("ALLREDUCE")]


def summary(runs, key):
    return statistics.median(r[key] for r in runs)


def spread(runs):
    """Half the range of all timed windows of all launches, relative to the median."""
    values = [w for r in runs for w in r["windows"]]
    return (max(values) - min(values)) / 2 / summary(runs, "sps")


def rate(v):
    return f"{v / 1000:.1f}k" if v >= 10000 else f"{v:.0f}"


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def wait_for_quiet(threshold, limit_s):
    """Polls the 1-minute load average; returns whether it fell below threshold in time."""
    deadline = time.monotonic() + limit_s
    while True:
        load = float(loadavg()[0])
        if load < threshold:
            return True
        if time.monotonic() >= deadline:
            return False
        print(f"harness: load {load:.2f} >= {threshold}, waiting", file=sys.stderr, flush=True)
        time.sleep(30)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def blas_alternative():
    link = "/etc/alternatives/libblas.so.3-x86_64-linux-gnu"
    return f"{link} -> {os.path.realpath(link)}" if os.path.exists(link) else "no libblas.so.3 alternative"


def markdown(args, runs, reductions, load_before, load_after, quiet):
    lines = []
    add = lines.append
    add(f"Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}  ")
    add(f"Machine: {os.cpu_count()} CPUs, {cpu_model()}, Linux {platform.release()}  ")
    mapped = sorted({b for rs in runs.values() for r in rs for b in r["blas"]})
    add(f"BLAS: {blas_alternative()}; mapped by the ranks: {', '.join(mapped) or 'none'}  ")
    if any("/blas/libblas" in b for b in mapped):
        add("**WARNING: the reference BLAS is loaded: every figure is many times slower than with OpenBLAS.**  ")
    add(f"Load average (1, 5, 15 min) before: {', '.join(load_before)}; after: {', '.join(load_after)}"
        + ("" if quiet else f" (**not quiet**: above {args.quiet_load} when the run started)") + "  ")
    add(f"Command: `{' '.join(['bench/run.sh'] + args.passed)}` ({args.repeats} launches of each row, "
        "one intra-op thread per rank)")
    add("")
    keys = sorted({(w, n) for (w, n, _) in runs}, key=lambda k: (list(WORKLOADS).index(k[0]), k[1]))

    add("### Throughput (samples/s, all ranks; median, ± half the range of all timed windows)")
    add("")
    add("| workload | ranks | accel | C++ | Python | accel/C++ | accel/Python |")
    add("|---|---|---|---|---|---|---|")
    for w, n in keys:
        s = {v: summary(runs[(w, n, v)], "sps") for v in VERSIONS}
        cells = [f"{rate(s[v])} ±{spread(runs[(w, n, v)]) * 100:.0f}%" for v in VERSIONS]
        add(f"| {w} | {n} | {' | '.join(cells)} | {s['accel'] / s['C++']:.2f} | {s['accel'] / s['Python']:.2f} |")
    add("")

    add("### Launch to first step, peak memory, loss")
    add("")
    add("| workload | ranks | first step s (accel / C++ / Python) | rank peak RSS MiB (accel / C++ / Python) "
        "| launcher peak RSS MiB (accel-run / bench_launch / torchrun) | loss (accel / C++ / Python) |")
    add("|---|---|---|---|---|---|")
    for w, n in keys:
        r = {v: runs[(w, n, v)] for v in VERSIONS}
        first = " / ".join(f"{summary(r[v], 'first_step'):.2f}" for v in VERSIONS)
        mem = " / ".join(f"{summary(r[v], 'rank_mib'):.0f}" for v in VERSIONS)
        launcher = " / ".join(f"{summary(r[v], 'launcher_mib'):.1f}" for v in VERSIONS)
        loss = " / ".join(f"{r[v][0]['loss']:.4f}" for v in VERSIONS)
        add(f"| {w} | {n} | {first} | {mem} | {launcher} | {loss} |")
    add("")
    steps = ", ".join(f"{w} {l[0] + l[1] * l[2]}" for w, (_, l) in WORKLOADS.items())
    add(f"Steps per launch: {steps}; the loss is the mean over the last window on rank 0.")
    add("")

    if reductions:
        add("### Gradient all-reduce, 2 ranks (median of 20)")
        add("")
        add("| bytes | parameters | buckets | c10d ProcessGroupGloo ms | GB/s | accel GradientReducer ms | GB/s "
            "| accel/c10d time |")
        add("|---|---|---|---|---|---|---|---|")
        for r in reductions:
            size = r["bytes"]
            label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
            add(f"| {label} | {r['params']} | {r['buckets']} | {r['raw_s'] * 1e3:.3f} | {size / r['raw_s'] / 1e9:.2f} "
                f"| {r['engine_s'] * 1e3:.3f} | {size / r['engine_s'] / 1e9:.2f} | {r['engine_s'] / r['raw_s']:.2f} |")
        add("")
        add("accel's time is what a synchronising backward adds (backward with the reducer on, plus finalize, "
            "minus backward with it off); c10d's is one all-reduce of one tensor of the same bytes.")
        add("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the build folder (accel-run, bench/bench_*)")
    parser.add_argument("--repeats", type=int, default=3, help="launches of each row (default 3)")
    parser.add_argument("--only", action="append", choices=list(WORKLOADS), help="run only this workload")
    parser.add_argument("--no-allreduce", action="store_true", help="skip the gradient all-reduce table")
    parser.add_argument("--quiet-load", type=float, default=1.5,
                        help="wait for the 1-minute load average to fall below this (default 1.5)")
    parser.add_argument("--wait", type=float, default=1200,
                        help="seconds to wait for that at most, then run anyway and say so (default 1200)")
    parser.add_argument("--output", help="also write the markdown to this file")
    args = parser.parse_args()
    args.passed = [a for a in sys.argv[1:] if not a.startswith("--build") and a != args.build]

    quiet = wait_for_quiet(args.quiet_load, args.wait)
    load_before = loadavg()
    runs = run_workloads(args)
    reductions = [] if args.no_allreduce else allreduce(args)
    text = markdown(args, runs, reductions, load_before, loadavg(), quiet)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    with results.published("bench/workloads", "Workloads: accel against LibTorch C++ and Python PyTorch DDP"):
        main()
