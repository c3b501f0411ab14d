"""Save to first finished step: how long after a recipe is saved its first
training step ends, on 1 and 2 ranks, three ways:
  --watch     accel-run --watch already running (warm workers); the clock
              starts just before the recipe file is replaced (an editor's
              save: a new file renamed over the old one)
  cold        a new `accel-run` of the recipe; the clock starts just before
              the command
  torchrun    a new torchrun of the Python twin; the clock starts just before
              the command
The workload is digits-mlp (bench/workloads/digits_mlp.lua and its twin
bench/python/digits_mlp.py) cut to two steps; the first step's end is the
CLOCK_MONOTONIC time rank 0 prints in its BENCH line. bench/run.sh --watch
builds accel-run and calls this; it prints a markdown table.
"""
import argparse
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import harness
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)

STEPS = ("1", "1", "1")  # warm-up steps, steps per window, windows


def cold(version, nproc, build):
    cmd = harness.command(version, "digits_mlp", nproc, STEPS, build)
    start, out, _ = harness.launch(cmd, f"{version} on {nproc} ranks")
    return harness.bench_reports(out, nproc, version)[0]["first_step"] - start


class Watch:
    """accel-run --watch on a private copy of the workload, read line by line."""

    def __init__(self, nproc, build):
        self.folder = tempfile.mkdtemp(prefix="accel-watch-bench-")
        for name in ("digits_mlp.lua", "bench.lua"):
            shutil.copy(os.path.join(harness.ROOT, "bench/workloads", name), self.folder)
        self.recipe = os.path.join(self.folder, "digits_mlp.lua")
        self.nproc = nproc
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [os.path.join(build, "accel-run"), self.recipe, "--watch", "--nproc", str(nproc), "--threads", "1",
             "--"] + list(STEPS), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.reports()  # the first run, on workers just started

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def reports(self):
        out = []
        while sum("BENCH {" in line for line in out) < self.nproc:
            try:
                out.append(self.lines.get(timeout=60))
            except queue.Empty:
                sys.exit("watch_latency: no BENCH line from accel-run --watch within 60 s:\n" + "".join(out))
        return harness.bench_reports("".join(out), self.nproc, "accel-run --watch")

    def save_to_first_step(self, n):
        with open(self.recipe) as f:
            text = f.read()
        temporary = self.recipe + ".new"
        with open(temporary, "w") as f:
            f.write(text + f"-- save {n}\n")
        start = time.monotonic()
        os.replace(temporary, self.recipe)
        return self.reports()[0]["first_step"] - start

    def close(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.folder)


def spread(values):
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True)
    parser.add_argument("--repeats", type=int, default=10, help="saves and launches of each row (default 10)")
    args = parser.parse_args()
    rows = []
    for nproc in (1, 2):
        watch = Watch(nproc, args.build)
        warm = [watch.save_to_first_step(n) for n in range(args.repeats)]
        watch.close()
        cold_accel, python = [], []
        for _ in range(args.repeats):
            cold_accel.append(cold("accel", nproc, args.build))
            python.append(cold("Python", nproc, args.build))
        rows.append(f"| {nproc} | {spread(warm)} | {spread(cold_accel)} | {spread(python)} | "
                    f"{statistics.median(cold_accel) / statistics.median(warm):.0f}x | "
                    f"{statistics.median(python) / statistics.median(warm):.0f}x |")
    print(f"### Save to first finished step, digits-mlp (seconds; median (min-max) of {args.repeats})\n")
    print("| ranks | accel-run --watch | cold accel-run | torchrun, Python twin | cold/watch | torchrun/watch |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    with results.published("bench/watch", "Save to first finished step under --watch"):
        main()
