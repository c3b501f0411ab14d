"""From `accel-run submit` to the first training step of a 124M-parameter
GPT-2 (random weights, made by make_checkpoint.lua, never downloaded) on
the warm workers of `accel-run serve`, against the same recipe started cold.

    /usr/bin/python3 bench/serve/first_step.py [--build build] [--repeats 10] [--nproc 1]

The time is taken just before the submit (or cold accel-run) process is
started; first_step.lua prints, on rank 0, the seconds from then to the
start of its first step (after from_pretrained and the optimizer), to the
step's end, and how many tensors the warm worker handed it from what a
previous run loaded. The first served run loads the checkpoint; the figure
is the median (min-max) of the runs after it. Prints a markdown table.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def first_step(command, cwd):
    start = time.monotonic()
    done = subprocess.run(command + ["--", checkpoint, repr(start)], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(command), done.stderr))
    for line in done.stdout.splitlines():
        if line.startswith("FIRST_STEP"):
            words = line.split()
            return float(words[2]), float(words[4]), int(words[6])
    sys.exit("no FIRST_STEP line from %s:\n%s" % (" ".join(command), done.stdout))


def spread(values):
    return "%.3f (%.3f-%.3f)" % (statistics.median(values), min(values), max(values))


parser = argparse.ArgumentParser()
parser.add_argument("--build", default="build")
parser.add_argument("--repeats", type=int, default=10)
parser.add_argument("--nproc", type=int, default=1)
options = parser.parse_args()
accel_run = os.path.abspath(os.path.join(options.build, "accel-run"))
work = tempfile.mkdtemp(prefix="accel-serve-bench-")
checkpoint = os.path.join(work, "gpt2-124m")
subprocess.run([accel_run, os.path.join(HERE, "make_checkpoint.lua"), "--", checkpoint], check=True,
               stdout=subprocess.DEVNULL)
recipe = os.path.join(HERE, "first_step.lua")
serve = subprocess.Popen([accel_run, "serve", "--nproc", str(options.nproc)], cwd=work, stderr=subprocess.PIPE,
                         text=True)
try:
    serve.stderr.readline()  # "accel-run: serving on ..."
    served = [first_step([accel_run, "submit", recipe], work) for _ in range(options.repeats + 1)]
finally:
    serve.terminate()
    serve.wait()
cold = [first_step([accel_run, recipe, "--nproc", str(options.nproc)], work) for _ in range(3)]
load = os.getloadavg()[0]
print("| %d rank(s), load %.2f | submit to first step (s) | to its end (s) | tensors kept |" % (options.nproc, load))
print("|---|---|---|---|")
print("| served, first run | %.3f | %.3f | %d |" % served[0])
print("| served, runs 2-%d | %s | %s | %d |" % (len(served), spread([s[0] for s in served[1:]]),
                                              spread([s[1] for s in served[1:]]), served[-1][2]))
print("| cold | %s | %s | %d |" % (spread([c[0] for c in cold]), spread([c[1] for c in cold]), cold[-1][2]))
