"""Memory and speed of sharded data parallel: accel's plain data parallel,
zero_stage 1, 2, 3 and FSDP FULL_SHARD wrapping Block (stage 3 and FSDP also
with the model built on the main process only), next to PyTorch's DDP
and DDP with ZeroRedundancyOptimizer, on the same ~100M-parameter language
model (lm.lua, lm.py), and prints one markdown table. bench/run.sh --sharding
builds accel-run and calls this; see bench/README.md ("sharding_memory").

Each rank prints one SHARDING line with:
  numel            the model's parameters
  unit_numel       stage 3: the parameters of the largest unit gathered at once
  samples_per_s    all ranks, over the steps after the warm-up
  rss_base_kib     VmRSS before the model is built
  init_peak_kib    VmHWM once the model and optimizer are prepared (the model built whole on
                   every rank, or in the *_empty modes on the main process only)
  train_peak_kib   VmHWM over the training steps (reset after preparing)
  param_bytes, grad_bytes, optim_bytes
                   what the rank holds after its last step, before zero_grad
  live_base_bytes, live_peak_bytes
                   accel only: the CPU allocator's bytes held by tensors (accel.cpu_memory_stats)
                   before the model is built, and at most over the training steps
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "python"))
from harness import cpu_model, free_port, loadavg, wait_for_quiet  # noqa: E402  (bench/python's)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)

# (version, mode, label)
ROWS = [
    ("accel", "ddp", "plain data parallel"),
    ("accel", "zero1", "zero_stage 1"),
    ("accel", "zero2", "zero_stage 2"),
    ("accel", "zero3", "zero_stage 3"),
    ("accel", "zero3_empty", "zero_stage 3, built empty off the main process"),
    ("accel", "fsdp", "FSDP FULL_SHARD, wrapping Block"),
    ("accel", "fsdp_empty", "FSDP FULL_SHARD by Block, cpu_ram_efficient_loading"),
    ("PyTorch", "ddp", "DDP"),
    ("PyTorch", "zero", "DDP + ZeroRedundancyOptimizer"),
]


def promised_bytes_per_param(mode, world):
    """The performance contract's model-state share for AdamW in fp32 (shared/DESIGN.md), before stage 3's
    working set."""
    return {"ddp": 16, "zero1": 8 + 8 / world, "zero": 8 + 8 / world, "zero2": 4 + 12 / world,
            "zero3": 16 / world, "zero3_empty": 16 / world, "fsdp": 16 / world, "fsdp_empty": 16 / world}[mode]


def command(version, mode, world, args, steps):
    sizes = {"layers": args.layers, "width": args.width, "heads": args.heads, "vocab": args.vocab, "seq": args.seq,
             "batch": args.batch, "warmup": 1, "steps": steps}
    if version == "accel":
        return ([os.path.join(args.build, "accel-run"), os.path.join(HERE, "lm.lua"), "--nproc", str(world),
                 "--threads", "1", "--", mode] + [f"{k}={v}" for k, v in sizes.items()])
    return (["/usr/bin/python3", os.path.join(ROOT, "bench/python/torchrun.py"), "--nproc_per_node", str(world),
             "--master_port", str(free_port()), os.path.join(HERE, "lm.py"), mode]
            + [a for k, v in sizes.items() for a in (f"--{k}", str(v))])


def launch(cmd, world, tag):
    """Runs cmd; returns its ranks' reports sorted by rank, or the reason it gave none."""
    print(f"harness: {tag}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
    except subprocess.TimeoutExpired:
        return None, "timed out after 600 s"
    reports = [json.loads(line[line.index("SHARDING ") + 9:]) for line in proc.stdout.splitlines()
               if "SHARDING {" in line]
    if proc.returncode != 0 or sorted(r["rank"] for r in reports) != list(range(world)):
        lines = [l for l in (proc.stderr + proc.stdout).splitlines() if l.strip()]
        print(f"harness: {tag} failed (exit {proc.returncode}):\n" + "\n".join(lines[-30:]), file=sys.stderr)
        # accel-run's report names the failing rank, then quotes its error.
        first = next((i for i, l in enumerate(lines) if " failed with exit code " in l), None)
        reason = (lines[first + 1] if first is not None and first + 1 < len(lines)
                  else next((l for l in lines if "Error" in l), lines[-1] if lines else "no output"))
        return None, f"exit {proc.returncode}: {reason.strip()[:200]}"
    return sorted(reports, key=lambda r: r["rank"]), None


def mib(value_bytes):
    return value_bytes / 2**20


def run_all(args):
    results = {}  # (version, mode, world) -> summary, or the failure text
    for world in args.ranks:
        timed = world == 2
        for repeat in range(args.repeats if timed else 1):
            for version, mode, _ in ROWS:
                tag = f"{version} {mode} on {world} ranks" + (f", run {repeat + 1}" if timed else "")
                reports, failure = launch(command(version, mode, world, args, args.steps if timed else 1), world, tag)
                key = (version, mode, world)
                if failure:
                    results[key] = failure
                    continue
                if isinstance(results.get(key), str):
                    continue  # an earlier launch failed: the row says so
                # Memory: the largest rank of any launch; speed: rank 0's, one figure a launch.
                entry = results.setdefault(key, {"numel": reports[0]["numel"],
                                                 "unit_numel": reports[0]["unit_numel"], "sps": []})
                for field, value in [("state", max(r["param_bytes"] + r["grad_bytes"] + r["optim_bytes"]
                                                   for r in reports)),
                                     ("over_start", max(r["train_peak_kib"] - r["rss_base_kib"]
                                                        for r in reports) * 1024),
                                     ("init_peak_main", reports[0]["init_peak_kib"] * 1024),
                                     ("init_peak_others", max((r["init_peak_kib"] for r in reports[1:]), default=0) * 1024),
                                     ("train_peak", max(r["train_peak_kib"] for r in reports) * 1024)]:
                    entry[field] = max(entry.get(field, 0), value)
                if "live_peak_bytes" in reports[0]:
                    entry["live_over_start"] = max(entry.get("live_over_start", 0),
                                                   max(r["live_peak_bytes"] - r["live_base_bytes"] for r in reports))
                entry["sps"].append(reports[0]["samples_per_s"])
    return results


def markdown(args, results, load_before, load_after, quiet, started):
    lines = []
    add = lines.append
    add(f"Date: {started.strftime('%Y-%m-%d %H:%M')}  ")
    add(f"Machine: {os.cpu_count()} CPUs, {cpu_model()}, Linux {platform.release()}  ")
    add(f"Load average (1, 5, 15 min) before: {', '.join(load_before)}; after: {', '.join(load_after)}"
        + ("" if quiet else f" (**not quiet**: above {args.quiet_load} when the run started)") + "  ")
    add(f"Command: `{' '.join(['bench/run.sh', '--sharding'] + args.passed)}`  ")
    numel = next((r["numel"] for r in results.values() if isinstance(r, dict)), 0)
    add(f"Model: {numel / 1e6:.1f}M parameters (vocabulary {args.vocab}, width {args.width}, {args.layers} blocks of "
        f"{args.heads} heads), AdamW in fp32, batch {args.batch} x {args.seq} tokens per rank, one intra-op thread "
        f"per rank; 1 warm-up step, then {args.steps} timed steps at 2 ranks ({args.repeats} "
        f"launch{'es, median' if args.repeats > 1 else ''}), "
        "1 step at more ranks (memory only)")
    add("")
    add("| version | mode | ranks | model states MiB/rank | promised MiB/rank | measured/promised "
        "| peak RSS MiB (training) | over start MiB | over start / (promised + unit) "
        "| tensors' peak over start MiB | / (promised + unit) "
        "| peak RSS MiB (preparing), rank 0 / others "
        "| samples/s | vs its plain DP |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for world in args.ranks:
        for version, mode, label in ROWS:
            r = results.get((version, mode, world))
            if isinstance(r, str):
                add(f"| {version} | {label} | {world} | failed: {r} |" + " |" * 10)
                continue
            promised = r["numel"] * promised_bytes_per_param(mode, world)
            # Stage 3 may hold one gathered unit on top: its parameters and
            # its gradients before they are reduce-scattered.
            working = 8 * r["unit_numel"]
            over_start = r["over_start"]
            speed, versus = "", ""
            if world == 2:
                sps = statistics.median(r["sps"])
                speed = f"{sps:.2f}"
                dp = results.get((version, "ddp", 2))
                if isinstance(dp, dict):
                    versus = f"{sps / statistics.median(dp['sps']):.2f}"
            unit = f" (+{mib(working):.0f} unit)" if working else ""
            live = r.get("live_over_start")
            tensors = f"{mib(live):.0f} | {live / (promised + working):.2f}" if live is not None else " | "
            add(f"| {version} | {label} | {world} | {mib(r['state']):.0f} | {mib(promised):.0f}{unit} "
                f"| {r['state'] / promised:.2f} | {mib(r['train_peak']):.0f} | {mib(over_start):.0f} "
                f"| {over_start / (promised + working):.2f} | {tensors} "
                f"| {mib(r['init_peak_main']):.0f} / {mib(r['init_peak_others']):.0f} "
                f"| {speed} | {versus} |")
    add("")
    stage1, zero = results.get(("accel", "zero1", 2)), results.get(("PyTorch", "zero", 2))
    if isinstance(stage1, dict) and isinstance(zero, dict):
        add(f"accel zero_stage 1 against ZeroRedundancyOptimizer at 2 ranks: peak RSS "
            f"{stage1['train_peak'] / zero['train_peak']:.2f}x, model states {stage1['state'] / zero['state']:.2f}x, "
            f"samples/s {statistics.median(stage1['sps']) / statistics.median(zero['sps']):.2f}x.")
        add("")
    add("Model states: parameters, gradients and optimizer state the rank holds after its last step (before "
        "zero_grad); promised: the performance contract's share (shared/DESIGN.md: 16 B a parameter unsharded, stage 1 8 + 8/N, stage 2 4 + 12/N, "
        "stage 3 16/N; ZeroRedundancyOptimizer is stage 1). Over start: the training peak less the RSS before the "
        "model was built (activations, communication buffers and allocator slack included). Tensors' peak over "
        "start (accel): the most bytes the CPU allocator's blocks over 1 KiB held for tensors over the steps, less "
        "what they held before the model was built (accel.cpu_memory_stats): the over-start figure without the "
        "allocator's pools, the heap's free memory and the rest of the process.")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the build folder (accel-run)")
    parser.add_argument("--ranks", default="2,4", help="comma-separated world sizes (default 2,4; timed at 2)")
    parser.add_argument("--repeats", type=int, default=1, help="launches of each row at 2 ranks (default 1)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps at 2 ranks (default 3)")
    for name, default in [("layers", 12), ("width", 768), ("heads", 12), ("vocab", 8192), ("seq", 64), ("batch", 2)]:
        parser.add_argument("--" + name, type=int, default=default, help=f"model and batch (default {default})")
    parser.add_argument("--quiet-load", type=float, default=1.5,
                        help="wait for the 1-minute load average to fall below this (default 1.5)")
    parser.add_argument("--wait", type=float, default=1200,
                        help="seconds to wait for that at most, then run anyway and say so (default 1200)")
    args = parser.parse_args()
    args.ranks = [int(n) for n in args.ranks.split(",")]
    args.passed = [a for a in sys.argv[1:] if not a.startswith("--build") and a != args.build]

    quiet = wait_for_quiet(args.quiet_load, args.wait)
    started, load_before = datetime.datetime.now(), loadavg()
    results = run_all(args)
    text = markdown(args, results, load_before, loadavg(), quiet, started)
    print(text)


if __name__ == "__main__":
    with results.published("bench/sharding_memory", "Sharding memory: each stage against PyTorch's ZeroRedundancyOptimizer"):
        main()
