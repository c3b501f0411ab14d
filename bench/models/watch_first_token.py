"""Save to first generated token with a pretrained checkpoint: how long after
a recipe that loads a ~100M-parameter Llama-architecture folder
(accel.models.from_pretrained) and generates is saved, its first token is
ready on every rank, on 1 and 2 ranks, two ways:
  --watch   accel-run --watch already running (warm workers, which keep what
            from_pretrained loaded: engine/formats/kept_weights.h); the
            clock starts just before the recipe file is replaced (an
            editor's save: a new file renamed over the old one)
  cold      a new `accel-run` of the recipe; the clock starts just before
            the command
The checkpoint is made once by accel itself (from_config, save_pretrained,
random weights) and its files are in the page cache for both (a first cold
run reads them). Prints a markdown table; bench/README.md says more.
  /usr/bin/python3 bench/models/watch_first_token.py --build build
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

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPE = os.path.join(HERE, "first_token.lua")

MAKE = """
accel.set_seed(0)
local m = accel.models.from_config({{ model_type = "llama", vocab_size = 32000, hidden_size = 768,
  intermediate_size = 2048, num_hidden_layers = 12, num_attention_heads = 12, num_key_value_heads = 4 }})
print(m:num_parameters())
m:save_pretrained("{folder}")
"""


def make_checkpoint(build, folder):
    script = os.path.join(folder, "make.lua")
    with open(script, "w") as f:
        f.write(MAKE.format(folder=os.path.join(folder, "llama")))
    out = subprocess.run([os.path.join(build, "accel-run"), "--threads", "2", script], check=True,
                         capture_output=True, text=True).stdout
    return int(out.split()[-1]), os.path.join(folder, "llama")


def reports(lines, nproc, timeout=120):
    """The FIRST_TOKEN lines of one run, as [(rank, time, found)]."""
    got = []
    while len(got) < nproc:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            sys.exit(f"watch_first_token: no FIRST_TOKEN line within {timeout} s")
        if "FIRST_TOKEN " in line:  # other ranks' lines start with "[rank N] "
            _, rank, ready, found = line[line.index("FIRST_TOKEN "):].split()
            got.append((int(rank), float(ready), int(found)))
    return got


def cold(build, recipe, checkpoint, nproc):
    start = time.monotonic()
    out = subprocess.run([os.path.join(build, "accel-run"), recipe, "--nproc", str(nproc), "--threads", "1",
                          "--", checkpoint], check=True, capture_output=True, text=True).stdout
    lines = queue.Queue()
    for line in out.splitlines():
        lines.put(line)
    return max(t for _, t, _ in reports(lines, nproc)) - start


class Watch:
    def __init__(self, build, recipe, checkpoint, nproc):
        self.recipe, self.nproc = recipe, nproc
        self.proc = subprocess.Popen(
            [os.path.join(build, "accel-run"), recipe, "--watch", "--nproc", str(nproc), "--threads", "1", "--",
             checkpoint], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        reports(self.lines, nproc)  # the first run, on workers just started

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def save_to_first_token(self, n):
        with open(self.recipe) as f:
            text = f.read()
        with open(self.recipe + ".new", "w") as f:
            f.write(text + f"-- save {n}\n")
        start = time.monotonic()
        os.replace(self.recipe + ".new", self.recipe)
        got = reports(self.lines, self.nproc)
        return max(t for _, t, _ in got) - start, min(found for _, _, found in got)

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def spread(values):
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True)
    parser.add_argument("--repeats", type=int, default=10, help="saves and launches of each row (default 10)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="accel-first-token-")
    try:
        parameters, checkpoint = make_checkpoint(args.build, folder)
        recipe = os.path.join(folder, "first_token.lua")
        shutil.copy(RECIPE, recipe)
        cold(args.build, recipe, checkpoint, 1)  # the files into the page cache
        rows = []
        for nproc in (1, 2):
            watch = Watch(args.build, recipe, checkpoint, nproc)
            warm = [watch.save_to_first_token(n) for n in range(args.repeats)]
            watch.close()
            cold_runs = [cold(args.build, recipe, checkpoint, nproc) for _ in range(args.repeats)]
            seconds = [s for s, _ in warm]
            rows.append(f"| {nproc} | {spread(seconds)} | {spread(cold_runs)} | "
                        f"{statistics.median(cold_runs) / statistics.median(seconds):.1f}x | "
                        f"{min(found for _, found in warm)} |")
        print(f"### Save to first generated token, {parameters / 1e6:.0f}M-parameter Llama "
              f"(seconds; median (min-max) of {args.repeats})\n")
        print("| ranks | accel-run --watch | cold accel-run | cold/watch | tensors a warm rerun was handed |")
        print("|---|---|---|---|---|")
        print("\n".join(rows))
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
