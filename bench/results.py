#!/usr/bin/env python3
"""Each benchmark's figures live in one file beside it, bench/<name>/RESULTS.md,
which its harness rewrites on every full run: a heading, the date, the
machine and the command, then the tables it printed. Older figures are in
git's history of that file, never appended by hand.

A Python harness runs its main() under published(), which passes what it
prints through and writes it when the harness ends well (`--no-results`,
for a partial run such as `--only`, writes nothing); a harness that is a
Lua file or a shell script runs under `record`, which does the same (or pipes its figures to
`publish FOLDER TITLE COMMAND`):

    bench/results.py record bench/parallel "The device mesh's layouts at 4 ranks" -- \\
        build/accel-run --nproc 4 --threads 1 bench/parallel/layouts.lua
"""
import contextlib
import datetime
import io
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine():
    """'2 CPUs, AMD EPYC 7B13, Linux 6.1.0 (x86_64)', plus the GPU where one is visible."""
    text = f"{os.cpu_count()} CPUs, {cpu_model()}, {platform.system()} {platform.release()} ({platform.machine()})"
    try:
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        if gpus.returncode == 0 and gpus.stdout.strip():
            text += "; GPU: " + ", ".join(sorted(set(gpus.stdout.split("\n")) - {""}))
    except (OSError, subprocess.TimeoutExpired):
        pass
    return text


def results_path(folder, name="RESULTS.md"):
    folder = folder if os.path.isabs(folder) else os.path.join(ROOT, folder)
    return os.path.join(folder, name)


def publish(folder, title, command, body, name="RESULTS.md"):
    """Writes <folder>/<name>: `title`, the date, the machine and `command`
    (what to run to get it again), then `body`, the harness's markdown.
    Returns the path written."""
    path = results_path(folder, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = [f"# {title}", "",
              f"Written by its harness, {now}; earlier figures are in this file's git history.  ",
              f"Machine: {machine()}  ",
              f"Command: `{command}`", "", ""]
    with open(path, "w") as f:
        f.write("\n".join(header) + body.rstrip("\n") + "\n")
    print(f"results: wrote {os.path.relpath(path, ROOT)}", file=sys.stderr)
    return path


class _Tee(io.StringIO):
    def __init__(self, stream):
        super().__init__()
        self.stream = stream

    def write(self, text):
        self.stream.write(text)
        return super().write(text)

    def flush(self):
        self.stream.flush()


@contextlib.contextmanager
def published(folder, title, name="RESULTS.md"):
    """Runs the block with stdout copied; when it ends without an error,
    publishes the copy as <folder>/<name>, the command being this program
    and its arguments. `--no-results` among them is taken out and writes
    nothing."""
    write = "--no-results" not in sys.argv
    if not write:
        sys.argv.remove("--no-results")
    command = " ".join([os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:])
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    if write:
        publish(folder, title, command, tee.getvalue(), name)


def record(argv):
    """record FOLDER TITLE [--name FILE] -- COMMAND...: runs COMMAND, shows its
    output and, when it succeeds, publishes its stdout."""
    if "--" not in argv or argv.index("--") < 2:
        sys.exit("usage: bench/results.py record FOLDER TITLE [--name FILE] -- COMMAND...")
    split = argv.index("--")
    folder, title, options, command = argv[0], argv[1], argv[2:split], argv[split + 1:]
    name = options[options.index("--name") + 1] if "--name" in options else "RESULTS.md"
    run = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        sys.exit(f"results: {' '.join(command)} failed ({run.returncode}); nothing written")
    publish(folder, title, " ".join(command), run.stdout, name)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "publish":  # publish FOLDER TITLE COMMAND < the markdown
        publish(sys.argv[2], sys.argv[3], sys.argv[4], sys.stdin.read())
    elif len(sys.argv) >= 2 and sys.argv[1] == "record":
        record(sys.argv[2:])
    else:
        sys.exit(__doc__)
