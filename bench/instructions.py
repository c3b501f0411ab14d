#!/usr/bin/python3
"""The engine's cost against hand-written LibTorch C++, in instructions.

On a shared virtual machine the same timed run varies by 10 to 40% from one
launch to the next, so a change of 10% cannot be seen in samples/s. Counted
instructions do not vary. Each case runs twice under valgrind's callgrind,
with a small and a larger amount of work. The difference between the two
totals, divided by the difference in work, is the cost of one unit: start-up
and reading the data cancel out. Prints a markdown table.

    bench/instructions.py [--build build]

Instructions are not time: memory and branch behaviour are not counted
(bench/allocators/RESULTS.md's history has a change that ran fewer instructions and took longer).
Use this to see what a change does to the work, and bench/run.sh for speed.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cases(build):
    accel_run = os.path.join(build, "accel-run")
    worker = {"ACCEL_ROLE": "worker", "ACCEL_THREADS": "1"}
    op_script = os.path.join(ROOT, "bench/op_overhead/op_overhead.lua")
    digits = os.path.join(ROOT, "bench/workloads/digits_mlp.lua")
    # (name, unit, {side: (command for `n` units, environment)}, small n, large n).
    # op_overhead runs each of its 3 ops n + n/10 (warm-up) times, and the
    # workloads run warm-up 1 + 50 steps per window.
    return [
        ("a + b, a:mul(b), a:sum() on 16 elements (mean)", "call",
         {"accel": (lambda n: [accel_run, op_script, "--", str(n)], worker),
          "C++": (lambda n: [os.path.join(build, "bench/op_overhead"), "--cpp-only", "--rounds", "1",
                             "--calls", str(n)], {})},
         lambda n: 3 * (n + n // 10), 1000, 41000),
        ("digits-mlp, 1 rank", "step",
         {"accel": (lambda n: [accel_run, digits, "--", "1", "50", str(n)], worker),
          "C++": (lambda n: [os.path.join(build, "bench/bench_digits_mlp"), "1", "50", str(n)], {})},
         lambda n: 50 * n, 1, 3),
    ]


def instructions(command, env):
    """Total instructions callgrind counted for one run of `command`."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "callgrind.out")
        run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + command,
                             env={**os.environ, **env}, capture_output=True, text=True)
        match = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or not match:
            sys.exit("instructions: %s failed under callgrind:\n%s" % (" ".join(command), run.stderr[-2000:]))
        return int(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build folder (default build/)")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("instructions: needs valgrind (apt-get install valgrind)")
    all_cases = cases(os.path.abspath(args.build))
    jobs = []
    for name, unit, sides, units, small, large in all_cases:
        for side, (command, env) in sides.items():
            for n in (small, large):
                jobs.append(((name, side, n), command(n), env))
    print("instructions: %d runs under callgrind, 2 at a time; a few minutes" % len(jobs), file=sys.stderr)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        totals = dict(zip([key for key, _, _ in jobs], pool.map(lambda j: instructions(j[1], j[2]), jobs)))

    print("| case | unit | accel instructions | C++ instructions | accel/C++ |")
    print("|---|---|---|---|---|")
    for name, unit, sides, units, small, large in all_cases:
        per_unit = {side: (totals[(name, side, large)] - totals[(name, side, small)]) / (units(large) - units(small))
                    for side in sides}
        print("| %s | %s | %.0f | %.0f | %.2f |" % (name, unit, per_unit["accel"], per_unit["C++"],
                                                   per_unit["accel"] / per_unit["C++"]))


if __name__ == "__main__":
    with results.published("bench/instructions", "Instructions per call and per step (callgrind)"):
        main()
