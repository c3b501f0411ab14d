#!/usr/bin/env python3
"""Live runs (docs/live-runs.md, issue 52), measured; bench/README.md ("live"):

  rollback     spike_guard's rollback of a 100M-parameter model's full state (model + AdamW) from
               its host snapshot (rollback.lua); goal under 1 s
  async_save   the step time while acc:save_state(dir, {async = true}) of that model writes, against
               a step without a save and the synchronous save's stall (async_save.lua); goal 1.2x
  status       1,000 `status` calls through the run's real control socket while it trains (the
               protocol accel-run ctl speaks, one connection), spread over a 5 s window, the step time
               in those windows against quiet windows of the same length, alternating
               (status_cost.lua); goal under 1% overhead

Each part runs REPEATS times (a new launch each); the tables are the median run's, and the summary
gives every run's figure. Writes bench/live/RESULTS.md unless --no-results.

  bench/live/harness.py [--build build] [--repeats 3] [--only rollback,async_save,status]
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)


def accel_run(build, script, *args):
    command = [os.path.join(ROOT, build, "accel-run"), os.path.join(HERE, script), "--threads", "2", "--", *args]
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1200)
    if run.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return run.stdout


def figure(text, pattern):
    return float(re.search(pattern, text).group(1))


def repeated(name, runs, pattern, unit):
    """Prints the median run's tables and every run's figure."""
    values = [figure(r, pattern) for r in runs]
    median_run = sorted(zip(values, runs))[len(runs) // 2][1]
    print(median_run.rstrip("\n"))
    print("")
    print(f"{name}, each run: " + ", ".join(f"{v:.3f}" for v in values) + f" {unit}; median {statistics.median(values):.3f}")
    print("")


def live_folder(launcher_pid):
    """The run folder (engine/launch/live_run_folder.h) whose launcher is `launcher_pid`."""
    base = os.path.join(os.environ["XDG_RUNTIME_DIR"], "accel-runs") if os.environ.get("XDG_RUNTIME_DIR") \
        else f"/tmp/accel-runs-{os.getuid()}"
    for _ in range(600):
        for name in os.listdir(base) if os.path.isdir(base) else []:
            folder = os.path.join(base, name)
            try:
                with open(os.path.join(folder, "run")) as f:
                    if f"pid {launcher_pid}\n" in f.read() and os.path.exists(os.path.join(folder, "control.sock")):
                        return folder
            except OSError:
                pass
        time.sleep(0.05)
    sys.exit(f"no live run folder for launcher {launcher_pid} under {base}")


class Control:
    """One connection to a run's control socket, past its hello (live_control_server.h)."""

    def __init__(self, folder):
        with open(os.path.join(folder, "secret")) as f:
            secret = f.read()
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(os.path.join(folder, "control.sock"))
        self.buffer = b""
        self.sock.sendall(f"hello {secret}\n".encode())
        answer = self.line()
        if answer != b"ok":
            sys.exit(f"the run refused the connection: {answer.decode()}")

    def line(self):
        while b"\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                sys.exit("the run closed its control socket")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def ask(self, chunk):
        data = chunk.encode()
        self.sock.sendall(b"chunk %d\n" % len(data) + data)
        kind, _step, size = self.line().split(b" ")
        while len(self.buffer) < int(size):
            self.buffer += self.sock.recv(65536)
        text, self.buffer = self.buffer[:int(size)], self.buffer[int(size):]
        if kind != b"ok":
            sys.exit(f"status was refused: {text.decode()}")
        return text.decode()


def status_run(build, calls, rounds, seconds):
    """One launch: quiet and status windows in turn; returns its markdown and the overhead in %."""
    work = tempfile.mkdtemp(prefix="accel_bench_status_")
    out, ready, stop = (os.path.join(work, n) for n in ("steps.txt", "ready", "stop"))
    command = [os.path.join(ROOT, build, "accel-run"), os.path.join(HERE, "status_cost.lua"), "--threads", "1",
               "--", out, ready, stop]
    launcher = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work)
    try:
        control = Control(live_folder(launcher.pid))
        while not os.path.exists(ready):
            if launcher.poll() is not None:
                sys.exit(f"the run ended before its warm-up: {launcher.stderr.read()[-3000:]}")
            time.sleep(0.05)
        windows, latencies, sample = [], [], ""
        for _ in range(rounds):
            # `calls` calls spread evenly over `seconds`, then a quiet window as long.
            start = time.monotonic()
            for n in range(calls):
                asked = time.monotonic()
                sample = control.ask("status")
                latencies.append(time.monotonic() - asked)
                time.sleep(max(0.0, start + (n + 1) * seconds / calls - time.monotonic()))
            end = time.monotonic()
            windows.append(("status", start, end))
            time.sleep(end - start)
            windows.append(("quiet", end, time.monotonic()))
        open(stop, "w").close()
        _, err = launcher.communicate(timeout=120)
        if launcher.returncode != 0:
            sys.exit(f"the run failed: {err[-3000:]}")
        with open(out) as f:
            ends = [tuple(float(v) for v in line.split()) for line in f]
    finally:
        if launcher.poll() is None:
            launcher.kill()
    steps = list(zip(ends, ends[1:]))

    def mean_step(a, b):
        """Wall and CPU seconds per step of the steps wholly inside [a, b], and their number."""
        inside = [(e[0] - s[0], e[1] - s[1]) for s, e in steps if s[0] >= a and e[0] <= b]
        if not inside:
            return None, None, 0
        return statistics.mean(w for w, _ in inside), statistics.mean(c for _, c in inside), len(inside)

    rows, ratios, cpu_ratios = [], [], []
    for i in range(0, len(windows), 2):
        (_, a, b), (_, c, d) = windows[i], windows[i + 1]
        busy, busy_cpu, n_busy = mean_step(a, b)
        quiet, quiet_cpu, n_quiet = mean_step(c, d)
        if busy and quiet:
            ratios.append(busy / quiet)
            cpu_ratios.append(busy_cpu / quiet_cpu)
            rows.append(f"| {i // 2 + 1} | {n_busy} | {busy * 1e3:.2f} | {busy_cpu * 1e3:.2f} | {n_quiet} "
                        f"| {quiet * 1e3:.2f} | {quiet_cpu * 1e3:.2f} | {(busy / quiet - 1) * 100:+.1f}% "
                        f"| {(busy_cpu / quiet_cpu - 1) * 100:+.1f}% |")
    overhead = (statistics.median(ratios) - 1) * 100
    cpu_overhead = (statistics.median(cpu_ratios) - 1) * 100
    text = [f"{calls} status calls per window of {seconds:g} s (spread evenly) over one connection, {rounds} windows, "
            f"each followed by a quiet one as long; median latency of a call {statistics.median(latencies) * 1e6:.0f} us "
            f"(the launcher answers from what the rank published). One reply: "
            f"`{sample.strip()}`", "",
            "| pair | steps with calls | wall ms/step | CPU ms/step | steps quiet | wall ms/step | CPU ms/step "
            "| wall overhead | CPU overhead |",
            "|---|---|---|---|---|---|---|---|---|", *rows, "",
            "CPU: the training process's own CPU time per step (every thread's), which is what the calls would add "
            "if answering them cost the rank anything; wall: the step as timed, which on this shared 2-core machine "
            "also pays for the CPU the client and the launcher take.", "",
            f"status overhead on the step (median of the pairs): wall {overhead:+.2f}%, goal under 1%: "
            f"{'met' if overhead < 1 else 'MISSED'}; the rank's CPU time {cpu_overhead:+.2f}%"]
    return "\n".join(text) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="rollback,async_save,status")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of a status window")
    args = parser.parse_args()
    parts = args.only.split(",")
    load = os.getloadavg()[0]
    print(f"Each part: {args.repeats} launches; the machine's load average at the start: {load:.2f}.")
    print("")
    if "rollback" in parts:
        print("### Rollback of a 100M-parameter model's state from its host snapshot (`rollback.lua`)\n")
        runs = [accel_run(args.build, "rollback.lua", "5") for _ in range(args.repeats)]
        repeated("rollback", runs, r"rollback: ([\d.]+) s", "s")
    if "async_save" in parts:
        print("### Steps while an async save of a 100M-parameter model writes (`async_save.lua`)\n")
        runs = [accel_run(args.build, "async_save.lua", "3") for _ in range(args.repeats)]
        repeated("step while writing / step without", runs, r"step while writing / step without: ([\d.]+)x", "x")
    if "status" in parts:
        print("### 1,000 `status` calls while training (`status_cost.lua`, one rank, one thread)\n")
        runs = [status_run(args.build, args.calls, args.rounds, args.seconds) for _ in range(args.repeats)]
        repeated("status overhead (wall)", runs, r"median of the pairs\): wall ([+\-\d.]+)%", "%")
    print(f"The machine's load average at the end: {os.getloadavg()[0]:.2f} (shared with other builds and tests).")


if __name__ == "__main__":
    if "--no-results" in sys.argv or "--only" in " ".join(sys.argv):
        if "--no-results" in sys.argv:
            sys.argv.remove("--no-results")
        main()
    else:
        with results.published("bench/live", "Live runs: rollback, async save and status while training"):
            main()
