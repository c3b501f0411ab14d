#!/usr/bin/env python3
"""accel.models against Hugging Face transformers on a Llama-architecture
checkpoint, in one invocation: load time and greedy generation throughput
(prefill and decode tokens/s at batch 1 and 8), float32 on the CPU, the same
intra-op threads for both; prints markdown on stdout (progress on stderr).
    bench/models/run.py                      # 124.7M parameters, about 2.5 minutes on 2 quiet cores
    bench/models/run.py --smoke              # a small model, under a minute
    bench/models/run.py --hidden 256 --layers 2 --repeats 1 --wait 0
Options: --threads 2, --hidden 768, --layers 12, --heads (hidden/64),
--kv-heads (heads/3), --intermediate (8/3 hidden, a multiple of 64),
--vocab 32000, --prompt 128, --new-tokens 128, --repeats 3 (generation
measures, each side), --load-repeats 3, --work /tmp/accel-models-bench
(where the checkpoint is made once, by transformers), --build build,
--python (transformers' Python: $ACCEL_ORACLE_VENV/bin/python, else
~/.cache/accel/transformers-venv/bin/python), --quiet-load 1.0 and
--wait 900 (seconds to wait for the 1-minute load average to fall below
it, polled every 60 s; then it runs anyway and says so).
Only the standard library here: the two sides run in their own processes
(accel_side.lua under accel-run, transformers_side.py under that Python).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def fmt_load(l):
    return ", ".join(f"{x:.2f}" for x in l)


def wait_quiet(threshold, wait):
    deadline = time.time() + wait
    while True:
        l = loadavg()
        if l[0] < threshold:
            return l, True
        if time.time() >= deadline:
            return l, False
        log(f"load average {fmt_load(l)}: waiting for the 1-minute figure to fall below {threshold}")
        time.sleep(min(60, max(1, deadline - time.time())))


def run(cmd, env):
    start = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        log(p.stdout)
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return wall


def median(xs):
    return statistics.median(xs)


def spread(xs, scale=1.0, digits=3):
    return f"{median(xs) * scale:.{digits}f} ({min(xs) * scale:.{digits}f}-{max(xs) * scale:.{digits}f})"


def first_difference(a, b):
    """(row, step) of the first differing token, 1-based step; None if equal."""
    for r, (ra, rb) in enumerate(zip(a, b)):
        for s, (x, y) in enumerate(zip(ra, rb)):
            if x != y:
                return r, s + 1
    return None


# The model's sizes and its checkpoint, shared with bench/finetune/run.py,
# which measures on the same folder.
def add_model_arguments(p):
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int)
    p.add_argument("--kv-heads", type=int)
    p.add_argument("--intermediate", type=int)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--tie-embeddings", action="store_true", help="lm_head shares the input embeddings' weight")


# Where the checkpoint and the builds are, the oracle's Python, and how quiet
# the machine must be first: shared with bench/finetune/run.py, each with its
# own defaults for the load and the wait.
def add_run_arguments(p, quiet_load, wait):
    p.add_argument("--work", default="/tmp/accel-models-bench")
    p.add_argument("--build", default=os.environ.get("ACCEL_BENCH_BUILD", "build"))
    p.add_argument("--python", default=os.path.join(
        os.environ.get("ACCEL_ORACLE_VENV", os.path.expanduser("~/.cache/accel/transformers-venv")), "bin/python"))
    p.add_argument("--quiet-load", type=float, default=quiet_load)
    p.add_argument("--wait", type=int, default=wait)


def fill_model_sizes(a):
    a.heads = a.heads or max(1, a.hidden // 64)
    a.kv_heads = a.kv_heads or max(1, a.heads // 3)
    a.intermediate = a.intermediate or -(-a.hidden * 8 // 3 // 64) * 64


def checkpoint(a, prompt, env):
    """The folder bench/models/make_checkpoint.py makes for a's sizes (once,
    with transformers) and its bench_info.json."""
    name = (f"llama-h{a.hidden}-l{a.layers}-a{a.heads}-kv{a.kv_heads}-i{a.intermediate}-v{a.vocab}"
            f"-p{prompt}{'-tied' if a.tie_embeddings else ''}")
    ckpt = os.path.join(a.work, name)
    if not os.path.exists(os.path.join(ckpt, "bench_info.json")):
        os.makedirs(a.work, exist_ok=True)
        log(f"making {ckpt}")
        run([a.python, os.path.join(HERE, "make_checkpoint.py"), ckpt, "--hidden", str(a.hidden),
             "--layers", str(a.layers), "--heads", str(a.heads), "--kv-heads", str(a.kv_heads),
             "--intermediate", str(a.intermediate), "--vocab", str(a.vocab), "--prompt", str(prompt),
             *(["--tie-embeddings"] if a.tie_embeddings else [])], env)
    with open(os.path.join(ckpt, "bench_info.json")) as f:
        return ckpt, json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    add_model_arguments(p)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--load-repeats", type=int, default=3)
    p.add_argument("--batches", default="b1,b8", help="b1, b8 or both (comma-separated)")
    add_run_arguments(p, quiet_load=1.0, wait=900)
    p.add_argument("--smoke", action="store_true",
                   help="hidden 256, 2 layers, 32 new tokens, 1 repeat, no waiting (under a minute)")
    a = p.parse_args()
    if a.smoke:
        a.hidden, a.layers, a.new_tokens, a.repeats, a.load_repeats, a.wait = 256, 2, 32, 1, 1, 0
    fill_model_sizes(a)
    build = os.path.join(ROOT, a.build) if not os.path.isabs(a.build) else a.build
    accel_run = os.path.join(build, "accel-run")
    T = a.threads
    env = dict(os.environ, OMP_NUM_THREADS=str(T), MKL_NUM_THREADS=str(T), TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")

    ckpt, info = checkpoint(a, a.prompt, env)
    size = sum(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt) if f.endswith(".safetensors"))

    load_before, quiet = wait_quiet(a.quiet_load, a.wait)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    out = os.path.join(a.work, "out")
    os.makedirs(out, exist_ok=True)

    def accel_cmd(*args):
        return [accel_run, os.path.join(HERE, "accel_side.lua"), "--threads", str(T), "--", *args]

    def hf_cmd(mode, *args):
        return [a.python, os.path.join(HERE, "transformers_side.py"), mode, ckpt, str(T), *args]

    # Load time: fresh processes, interleaved; the first of each unrecorded
    # (it warms the page cache and the libraries' files).
    loads = {"accel": [], "transformers": []}
    for i in range(a.load_repeats + 1):
        for side in ("accel", "transformers"):
            path = os.path.join(out, f"load-{side}.json")
            cmd = accel_cmd("load", ckpt, path) if side == "accel" else hf_cmd("load", path)
            wall = run(cmd, env)
            with open(path) as f:
                r = json.load(f)
            r["wall_s"] = wall
            if i > 0:
                loads[side].append(r)
            log(f"load round {i}{' (warm-up)' if i == 0 else ''}, {side}: {wall:.2f} s")

    # Generation: one process a side, both batches.
    gens = {}
    for side in ("accel", "transformers"):
        path = os.path.join(out, f"generate-{side}.json")
        gen_args = [str(a.new_tokens), str(a.repeats), a.batches]
        cmd = accel_cmd("generate", ckpt, path, *gen_args) if side == "accel" else hf_cmd("generate", path, *gen_args)
        log(f"generating: {side}")
        run(cmd, env)
        with open(path) as f:
            gens[side] = json.load(f)
    load_after = loadavg()

    # The tables.
    acc, hf = gens["accel"], gens["transformers"]
    print(f"Date: {started}  ")
    print(f"Machine: {os.cpu_count()} CPUs, {os.uname().sysname} {os.uname().release}  ")
    print(f"Load average (1, 5, 15 min) before: {fmt_load(load_before)}"
          f"{'' if quiet else f' (not below {a.quiet_load} after waiting {a.wait} s)'}; after: {fmt_load(load_after)}  ")
    print(f"Model: Llama, {info['parameters'] / 1e6:.1f}M parameters (hidden {a.hidden}, {a.layers} layers, "
          f"{a.heads} heads, {a.kv_heads} kv heads, intermediate {a.intermediate}, vocab {a.vocab}), float32, "
          f"random weights, {size / 2**20:.0f} MiB of safetensors  ")
    print(f"accel: LibTorch with {', '.join(loads['accel'][0].get('blas', []))}; transformers "
          f"{hf['transformers']} on torch {hf['torch']} (BLAS {hf['blas']}), attention '{hf['attn_implementation']}'"
          f"  ")
    print(f"Threads: {T} (accel-run --threads {T}; torch.set_num_threads({T})); prompt {a.prompt} tokens, "
          f"{a.new_tokens} new tokens (min_new_tokens {a.new_tokens}), greedy; median of {a.repeats} "
          f"(generation) and {a.load_repeats} (load)  ")
    print()
    print("| measure | accel | transformers | accel/transformers speed |")
    print("|---|---|---|---|")

    def time_row(label, key):
        x = median([r[key] for r in loads["accel"]])
        y = median([r[key] for r in loads["transformers"]])
        print(f"| {label} | {x:.3f} s | {y:.3f} s | {y / x:.2f} |")

    time_row("load: from_pretrained call", "load_s")
    x = median([r["load_s"] + r["first_forward_s"] for r in loads["accel"]])
    y = median([r["load_s"] + r["first_forward_s"] for r in loads["transformers"]])
    print(f"| load + first forward (8 tokens) | {x:.3f} s | {y:.3f} s | {y / x:.2f} |")
    time_row("load: whole process wall", "wall_s")
    figures = {}
    for b in a.batches.split(","):
        B = len(acc[b]["tokens"])
        for side, g in (("accel", acc), ("transformers", hf)):
            prefill = median(g[b]["prefill_s"])
            decode = median(g[b]["generate_s"]) - prefill
            figures[side, b] = (B * a.prompt / prefill, B * (a.new_tokens - 1) / decode, prefill,
                                decode / (a.new_tokens - 1), B)
        fa, fh = figures["accel", b], figures["transformers", b]
        print(f"| prefill tokens/s, batch {B} ({B} x {a.prompt}) | {fa[0]:.0f} | {fh[0]:.0f} | {fa[0] / fh[0]:.2f} |")
        print(f"| decode tokens/s, batch {B} ({B} x {a.new_tokens - 1}) | {fa[1]:.1f} | {fh[1]:.1f} | "
              f"{fa[1] / fh[1]:.2f} |")
    print()
    for b in a.batches.split(","):
        d = first_difference(acc[b]["tokens"], hf[b]["tokens"])
        rows = len(acc[b]["tokens"])
        same = sum(ra == rb for ra, rb in zip(acc[b]["tokens"], hf[b]["tokens"]))
        stable = acc[b]["tokens_same_each_repeat"] and hf[b]["tokens_same_each_repeat"]
        verdict = "yes, all" if d is None else f"NO ({same}/{rows} rows equal; first difference row {d[0]}, new token {d[1]})"
        print(f"Greedy tokens equal, batch {rows}: {verdict} {rows} x {a.new_tokens}"
              f"{'' if stable else ' (a side gave different tokens from one repeat to the next)'}  ")
    print()
    print("Raw figures, median (min-max) in seconds:")
    print()
    print("| figure | accel | transformers |")
    print("|---|---|---|")
    for key, label in (("load_s", "from_pretrained call"), ("first_forward_s", "first forward, 8 tokens"),
                       ("wall_s", "load process wall")):
        print(f"| {label} | {spread([r[key] for r in loads['accel']])} | "
              f"{spread([r[key] for r in loads['transformers']])} |")
    print(f"| (transformers' import torch, transformers) | | {spread([r['import_s'] for r in loads['transformers']])} |")
    for b in a.batches.split(","):
        B = len(acc[b]["tokens"])
        print(f"| batch {B}: generate, 1 new token (prefill) | {spread(acc[b]['prefill_s'])} | "
              f"{spread(hf[b]['prefill_s'])} |")
        print(f"| batch {B}: generate, {a.new_tokens} new tokens | {spread(acc[b]['generate_s'])} | "
              f"{spread(hf[b]['generate_s'])} |")
        print(f"| batch {B}: ms per decode step (difference of medians / {a.new_tokens - 1}) | "
              f"{figures['accel', b][3] * 1e3:.1f} | {figures['transformers', b][3] * 1e3:.1f} |")
        print(f"| batch {B}: warm-up generate, 8 new tokens | {acc[b]['warmup_s']:.3f} | {hf[b]['warmup_s']:.3f} |")
    print()
    print(f"Command: `bench/models/run.py {' '.join(sys.argv[1:])}`".replace("run.py `", "run.py`"))


if __name__ == "__main__":
    with results.published("bench/models", "Hugging Face models against transformers"):
        main()
