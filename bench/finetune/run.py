#!/usr/bin/env python3
"""Fine-tuning a Llama-architecture model with accel against transformers +
PEFT + Accelerate, in one invocation: tokens/s and peak memory per rank, full
fine-tuning and LoRA, with and without gradient checkpointing, float32 on the
CPU, the same threads, data, weights and AdamW for both; prints markdown on
stdout (progress on stderr).
    bench/finetune/run.py                       # 124.7M parameters, 1 rank
    bench/finetune/run.py --ranks 1,2           # and 2 ranks of 1 thread each
    bench/finetune/run.py --smoke               # a small model, a few minutes
    bench/finetune/run.py --profile 15          # and where each side's step goes
    bench/finetune/run.py --llama-1b            # Llama 3.2 1B's shape: LoRA float32,
                                                # LoRA bf16, QLoRA (RESULTS-1b.md)
Options: --threads 2 (1 rank), --rank-threads 1 (2 ranks), --hidden 768,
--layers 12, --heads (hidden/64), --kv-heads (heads/3), --intermediate
(8/3 hidden, a multiple of 64), --vocab 32000, --batch 2, --seq 256,
--tie-embeddings, --warmup 2, --steps 5, --repeats 2 (launches of each side
per setting, interleaved), --modes full,lora (also lora-bf16: the base in
bfloat16; qlora: the base in 4 bits, nf4, double quantization, bfloat16
compute, prepare_model_for_kbit_training; both from LoRA's initial
adapter), --checkpointing off,on, --chunked on (accel's loss in chunks, its
default, or off: the logits made whole, as transformers does; transformers
has no chunked loss on the CPU, so its launch serves both), --lora-r 16,
--lora-alpha 32, --lora-targets q_proj,k_proj,v_proj,o_proj, --lr 1e-4,
--profile N (after the timed launches, one more launch a side and setting
on 1 rank whose last step runs under the profiler: a table of the N
operators with the most own time),
--kept-after-forward on (one more forward a side measuring what it keeps),
--reuse (a launch whose settings already have a result in the work folder
is not run again: an interrupted run resumes),
--work /tmp/accel-models-bench (where bench/models/make_checkpoint.py makes
the checkpoint once; bench/models shares it), --build build, --python
(transformers' Python: $ACCEL_ORACLE_VENV/bin/python, else
~/.cache/accel/transformers-venv/bin/python), --quiet-load 1.5 and --wait
600 (seconds to wait for the 1-minute load average to fall below it).
Only the standard library here: each side runs in its own processes
(accel_side.lua under accel-run, transformers_side.py under that Python,
through torch.distributed.run with Gloo on more than one rank).
"""
import argparse
import hashlib
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# bench/models/run.py's helpers: the load average, subprocesses, the checkpoint.
_models = importlib.util.spec_from_file_location("models_run", os.path.join(ROOT, "bench/models/run.py"))
models_run = importlib.util.module_from_spec(_models)
_models.loader.exec_module(models_run)
fmt_load, loadavg, log, run, wait_quiet = (models_run.fmt_load, models_run.loadavg, models_run.log, models_run.run,
                                           models_run.wait_quiet)

MiB = 2 ** 20
SIDES = ("accel", "transformers")
# --llama-1b: Llama 3.2 1B's shape (1.24B parameters, tied embeddings), one
# short sequence and few steps, so that all 12 settings fit in an hour.
LLAMA_1B = dict(hidden=2048, layers=16, heads=32, kv_heads=8, intermediate=8192, vocab=128256, tie_embeddings=True,
                batch=1, seq=256, warmup=1, steps=2, repeats=1, modes="lora,lora-bf16,qlora", chunked="off,on",
                checkpointing="off,on", kept_after_forward="off", wait=0)
# How far the two sides' first losses may be apart: the same sums in float32,
# bfloat16 products (and 4-bit codes decoded to them) rounded by other kernels.
LOSS_TOLERANCE = {"full": 1e-3, "lora": 1e-3, "lora-bf16": 5e-2, "qlora": 5e-2}


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def git_commit():
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + (" plus working-tree changes" if dirty else "")


def make_data(path, count, batch, seq, vocab):
    """count batches of batch x seq ids in [3, vocab) (never pad, bos, eos)."""
    rng = random.Random(0)
    batches = [[[rng.randrange(3, vocab) for _ in range(seq)] for _ in range(batch)] for _ in range(count)]
    with open(path, "w") as f:
        json.dump({"batches": batches}, f)


def combine(runs):
    """One setting's launches (each a list of rank results) as its figures:
    a step's time is its slowest rank's; tokens/s from the median step of all
    launches; memory the largest rank's, the median over launches."""
    steps, per_launch = [], []
    for ranks in runs:
        launch = [max(t) for t in zip(*(r["step_s"] for r in ranks))]
        steps += launch
        per_launch.append(statistics.median(launch))

    def mem(f):
        return statistics.median(max(f(r) for r in ranks) for ranks in runs)

    first = runs[0][0]
    return {
        "step_s": statistics.median(steps), "launch_step_s": per_launch,
        "peak_rss": mem(lambda r: max(r["peak_rss_setup"], r["peak_rss_training"])),
        "training_over_prepared": mem(lambda r: r["peak_rss_training"] - r["rss_prepared"]),
        "allocator_over_prepared": (mem(lambda r: r["allocator_peak_training"] - r["allocated_prepared"])
                                    if "allocator_peak_training" in first else None),
        "allocator_peak": (mem(lambda r: max(r["allocator_peak_setup"], r["allocator_peak_training"]))
                           if "allocator_peak_training" in first else None),
        "kept_after_forward": first.get("kept_after_forward"),
        "first_loss": first["losses"][0], "last_loss": first["losses"][-1],
        "trainable": first["trainable"], "info": first,
    }


def self_times(trace_path):
    """Milliseconds of each operator's own time (less the operators it
    called) in a Chrome trace of CPU operators, by name."""
    with open(trace_path) as f:
        trace = json.load(f)
    events = [e for e in (trace["traceEvents"] if isinstance(trace, dict) else trace)
              if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    totals = {}
    by_thread = {}
    for e in events:
        by_thread.setdefault(e["tid"], []).append(e)
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, children's time]
        for e in thread:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                done, children = stack.pop()
                totals[done["name"]] = totals.get(done["name"], 0) + done["dur"] - children
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0])
        for done, children in stack:
            totals[done["name"]] = totals.get(done["name"], 0) + done["dur"] - children
    return {k: v / 1000 for k, v in totals.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rank-threads", type=int, default=1)
    p.add_argument("--ranks", default="1", help="1, 2 or both (comma-separated)")
    models_run.add_model_arguments(p)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--modes", default="full,lora")
    p.add_argument("--checkpointing", default="off,on")
    p.add_argument("--chunked", default="on", help="accel's chunked loss: on, off or both")
    p.add_argument("--kept-after-forward", default="on")
    p.add_argument("--reuse", action="store_true", help="keep the results of launches already made with these settings")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=int, default=32)
    p.add_argument("--lora-targets", default="q_proj,k_proj,v_proj,o_proj")
    p.add_argument("--lr", type=float, default=1e-4)
    models_run.add_run_arguments(p, quiet_load=1.5, wait=600)
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after the timed launches, one profiled step a side and setting (1 rank): "
                        "the N operators taking the most time, by their own time")
    p.add_argument("--smoke", action="store_true",
                   help="hidden 256, 4 layers, vocab 4096, seq 64, 1 warm-up and 2 timed steps, 1 repeat, no waiting")
    p.add_argument("--llama-1b", action="store_true",
                   help="Llama 3.2 1B's shape, " + ", ".join(f"{k} {v}" for k, v in LLAMA_1B.items()) +
                        "; options given after it override these")
    a = p.parse_args()
    if a.llama_1b:
        p.set_defaults(**LLAMA_1B)
        a = p.parse_args()
    if a.smoke:
        a.hidden, a.layers, a.vocab, a.seq, a.warmup, a.steps, a.repeats, a.wait = 256, 4, 4096, 64, 1, 2, 1, 0
    models_run.fill_model_sizes(a)
    ranks = [int(r) for r in a.ranks.split(",")]
    modes = a.modes.split(",")
    checkpointing = [c == "on" for c in a.checkpointing.split(",")]
    chunked = [c == "on" for c in a.chunked.split(",")]
    build = a.build if os.path.isabs(a.build) else os.path.join(ROOT, a.build)
    accel_run = os.path.join(build, "accel-run")

    # The checkpoint bench/models measures on (its prompt length in the name).
    base_env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
                    PYTHONWARNINGS="ignore")
    ckpt, info = models_run.checkpoint(a, 128, base_env)
    name = os.path.basename(ckpt)

    out = os.path.join(a.work, "finetune", name)
    os.makedirs(out, exist_ok=True)
    data = os.path.join(out, f"data-b{a.batch}-s{a.seq}.json")
    make_data(data, (a.warmup + a.steps) * max(ranks), a.batch, a.seq, a.vocab)
    targets = a.lora_targets.split(",")
    adapter = os.path.join(out, f"adapter-r{a.lora_r}-a{a.lora_alpha}-{'-'.join(targets)}")

    def spec_for(mode, ck, world, profile=None, chunk=True):
        spec = {"checkpoint": ckpt, "data": data, "mode": mode, "checkpointing": ck, "chunked": chunk,
                "adapter": adapter,
                "lora_r": a.lora_r, "lora_alpha": a.lora_alpha, "lora_targets": targets, "seed": 0,
                "adamw": {"lr": a.lr, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01},
                "threads": a.threads if world == 1 else a.rank_threads,
                "warmup": a.warmup, "steps": a.steps,
                "kept_after_forward": world == 1 and a.kept_after_forward == "on"}
        if profile:
            spec.update(profile=profile, warmup=1, steps=1, kept_after_forward=False)
        path = os.path.join(out, f"spec-{mode}-{'ckpt' if ck else 'plain'}-{'chunked' if chunk else 'logits'}-{world}"
                                 f"{'-profile' if profile else ''}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        return spec, path

    # The initial adapter depends on nothing but the checkpoint and its path's settings: made once.
    if ({"lora", "lora-bf16", "qlora"} & set(modes)
            and not os.path.exists(os.path.join(adapter, "adapter_model.safetensors"))):
        log(f"saving the initial adapter (PEFT's get_peft_model, seed 0) to {adapter}")
        _, path = spec_for("lora", False, 1)
        run([a.python, os.path.join(HERE, "transformers_side.py"), "--save-adapter", path, adapter], base_env)

    settings = [(w, m, c) for w in ranks for m in modes for c in checkpointing]
    # accel's rows: each setting with and without the chunked loss.
    rows = [(w, m, c, k) for w, m, c in settings for k in chunked]
    load_before, quiet = wait_quiet(a.quiet_load, a.wait)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    clock = time.perf_counter()
    runs = {}

    def launch(side, world, mode, ck, tag, profile=None, chunk=True):
        """One launch of a side: its ranks' results."""
        spec, spec_path = spec_for(mode, ck, world, profile, chunk)
        T = str(spec["threads"])
        env = dict(base_env, OMP_NUM_THREADS=T, MKL_NUM_THREADS=T)
        digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
        prefix = os.path.join(out, f"result-{side}-{mode}-{int(ck)}-{int(chunk)}-{world}-{tag}-{digest}")
        if a.reuse and not profile and all(os.path.exists(f"{prefix}.{r}.json") for r in range(world)):
            log(f"{tag}, {world} rank(s), {mode}, checkpointing {'on' if ck else 'off'}, chunked {chunk}, {side}: "
                f"the results of {prefix}")
            return [json.load(open(f"{prefix}.{r}.json")) for r in range(world)]
        if side == "accel":
            cmd = [accel_run, os.path.join(HERE, "accel_side.lua"), "--threads", T, "--nproc", str(world),
                   "--", spec_path, prefix]
        else:
            launcher = ([] if world == 1 else
                        ["-m", "torch.distributed.run", "--nproc_per_node", str(world), "--master_port", "29531"])
            cmd = [a.python, *launcher, os.path.join(HERE, "transformers_side.py"), spec_path, prefix]
        start = time.perf_counter()
        for r in range(world):  # a failed launch leaves no result to reuse
            if os.path.exists(f"{prefix}.{r}.json"):
                os.remove(f"{prefix}.{r}.json")
        run(cmd, env)
        ranks_out = []
        for r in range(world):
            with open(f"{prefix}.{r}.json") as f:
                ranks_out.append(json.load(f))
        log(f"{tag}, {world} rank(s), {mode}, checkpointing {'on' if ck else 'off'}, chunked {chunk}, {side}: step "
            f"{statistics.median(ranks_out[0]['step_s']):.3f} s, launch {time.perf_counter() - start:.1f} s, "
            f"load {fmt_load(loadavg())}")
        return ranks_out

    for repeat in range(a.repeats):
        for world, mode, ck in settings:
            tag = f"repeat{repeat + 1}"
            for chunk in chunked:
                runs.setdefault((world, mode, ck, chunk, "accel"), []).append(
                    launch("accel", world, mode, ck, tag, chunk=chunk))
            runs.setdefault((world, mode, ck, None, "transformers"), []).append(
                launch("transformers", world, mode, ck, tag))
    load_after = loadavg()
    profiles = {}
    if a.profile:  # accel with the last --chunked value
        for world, mode, ck in settings:
            if world == 1:
                for side in SIDES:
                    folder = os.path.join(out, f"profile-{side}-{mode}-{int(ck)}")
                    r = launch(side, 1, mode, ck, "profile", folder, chunk=chunked[-1])[0]
                    profiles[mode, ck, side] = (r["profiled_step_s"], self_times(r["trace"]))
    figures = {k: combine(v) for k, v in runs.items()}
    hf = next(f["info"] for k, f in figures.items() if k[4] == "transformers")

    def pair(world, mode, ck, chunk):
        """accel's figures for a row and transformers' for its setting."""
        return figures[world, mode, ck, chunk, "accel"], figures[world, mode, ck, None, "transformers"]

    def on_off(flag):
        return "on" if flag else "off"

    # The tables.
    print(f"Date: {started}; {time.perf_counter() - clock:.0f} s of runs  ")
    print(f"Machine: {cpu_model()}, {os.cpu_count()} CPUs, {os.uname().sysname} {os.uname().release}; "
          f"accel at {git_commit()}  ")
    print(f"Load average (1, 5, 15 min) before: {fmt_load(load_before)}"
          f"{'' if quiet else f' (not below {a.quiet_load} after waiting {a.wait} s)'}; after: {fmt_load(load_after)}  ")
    print(f"Model: Llama, {info['parameters'] / 1e6:.1f}M parameters (hidden {a.hidden}, {a.layers} layers, "
          f"{a.heads} heads, {a.kv_heads} kv heads, intermediate {a.intermediate}, vocab {a.vocab}"
          f"{', tied embeddings' if a.tie_embeddings else ''}), float32 on disk, "
          f"random weights made by transformers, loaded by both  ")
    print(f"transformers {hf['transformers']}, PEFT {hf['peft']}, Accelerate {hf['accelerate']}, bitsandbytes "
          f"{hf.get('bitsandbytes')} on torch {hf['torch']}; accel on Debian's LibTorch 1.13.1  ")
    print(f"Batch {a.batch} x {a.seq} tokens per rank, labels the inputs; AdamW lr {a.lr}, betas 0.9/0.999, eps 1e-8, "
          f"weight decay 0.01; LoRA r {a.lora_r}, alpha {a.lora_alpha}, dropout 0, on {', '.join(targets)} "
          f"(the same initial adapter, float32 on every base); threads: {a.threads} on 1 rank, {a.rank_threads} a "
          f"rank on more; {a.warmup} warm-up and {a.steps} timed steps a launch, {a.repeats} launch(es) a side, "
          "interleaved  ")
    if "lora-bf16" in modes or "qlora" in modes:
        print("lora-bf16: the base loaded in bfloat16; qlora: loaded in 4 bits (nf4, double quantization, bfloat16 "
              "compute; the tied embeddings stay whole, as transformers skips them) then prepare_model_for_kbit_training "
              "(every bfloat16 parameter made float32, as PEFT's)  ")
    if False in chunked:
        print("chunked loss: accel's loss in chunks from the last hidden state (its default in training) or, off, "
              "the whole logits and their loss; transformers makes the whole logits in both rows (it has no "
              "chunked loss on the CPU), one launch serving both  ")
    print()
    print("| ranks | training | checkpointing | chunked loss | trainable | accel tokens/s | transformers tokens/s | "
          "accel/transformers speed | accel peak RSS MiB/rank | transformers peak RSS MiB/rank | "
          "accel/transformers peak | accel allocator peak MiB | accel training peak over prepared MiB | "
          "transformers, same | accel/transformers |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for world, mode, ck, chunk in rows:
        x, y = pair(world, mode, ck, chunk)
        tokens = world * a.batch * a.seq
        print(f"| {world} | {mode} | {on_off(ck)} | {on_off(chunk)} | {y['trainable']:,} | {tokens / x['step_s']:.1f} | "
              f"{tokens / y['step_s']:.1f} | {y['step_s'] / x['step_s']:.2f} | {x['peak_rss'] / MiB:.0f} | "
              f"{y['peak_rss'] / MiB:.0f} | {x['peak_rss'] / y['peak_rss']:.2f} | {x['allocator_peak'] / MiB:.0f} | "
              f"{x['training_over_prepared'] / MiB:.0f} | {y['training_over_prepared'] / MiB:.0f} | "
              f"{x['training_over_prepared'] / y['training_over_prepared']:.2f} |")
    print()
    print("Peak RSS: the process's high-water mark (VmHWM) over loading, preparing and the steps; the training "
          "peak over prepared: VmHWM over the steps (reset before them) less the RSS when they began. accel's "
          "allocator peak: the most its CPU allocator held at once (`accel.cpu_memory_stats`, blocks over 1 KiB), "
          "loading included  ")
    print()

    if "qlora" in modes and "lora-bf16" in modes:
        print("Goals, 1 rank: accel's peak RSS at most 0.9x transformers' in every row, accel's speed at least 1.0x, "
              "accel's QLoRA peak at most 0.5x its LoRA bf16 peak:")
        print()
        print("| checkpointing | chunked loss | accel qlora / lora-bf16 peak RSS | transformers, same |")
        print("|---|---|---|---|")
        for ck in checkpointing:
            for chunk in chunked:
                (xq, yq), (xb, yb) = pair(1, "qlora", ck, chunk), pair(1, "lora-bf16", ck, chunk)
                ratio = xq["peak_rss"] / xb["peak_rss"]
                print(f"| {on_off(ck)} | {on_off(chunk)} | {ratio:.2f} ({'met' if ratio <= 0.5 else 'NOT met'}) | "
                      f"{yq['peak_rss'] / yb['peak_rss']:.2f} |")
        print()
        met = [(pair(*r)[0]["peak_rss"] / pair(*r)[1]["peak_rss"] <= 0.9,
                pair(*r)[1]["step_s"] / pair(*r)[0]["step_s"] >= 1.0) for r in rows]
        print(f"Peak at most 0.9x: {sum(m[0] for m in met)} of {len(rows)} rows; speed at least 1.0x: "
              f"{sum(m[1] for m in met)} of {len(rows)} rows  ")
        print()

    ones = [(m, c, k) for w, m, c, k in rows if w == 1]
    if ones and a.kept_after_forward == "on":
        print("Activation memory, 1 rank: what one forward keeps for backward (and the loss and logits); "
              "accel from its allocator (`accel.cpu_memory_stats`, Lua's garbage collected), transformers from "
              "the allocations and frees torch's profiler records over the forward (`profile_memory`). accel's "
              "allocator peak over the training steps, above what was allocated when they began: gradients, "
              "AdamW's state from the first step, activations.")
        print()
        print("| training | checkpointing | chunked loss | accel kept after forward MiB | "
              "transformers kept after forward MiB | accel allocator peak over prepared MiB |")
        print("|---|---|---|---|---|---|")
        for mode, ck, chunk in ones:
            x, y = pair(1, mode, ck, chunk)
            print(f"| {mode} | {on_off(ck)} | {on_off(chunk)} | {x['kept_after_forward'] / MiB:.1f} | "
                  f"{y['kept_after_forward'] / MiB:.1f} | {x['allocator_over_prepared'] / MiB:.0f} |")
        print()
        for mode in modes:
            for chunk in chunked:
                if (mode, False, chunk) in ones and (mode, True, chunk) in ones:
                    ratios = [pair(1, mode, True, chunk)[i]["kept_after_forward"] /
                              pair(1, mode, False, chunk)[i]["kept_after_forward"] for i in range(2)]
                    print(f"Kept after forward with/without checkpointing at {a.layers} layers, {mode}, chunked "
                          f"loss {on_off(chunk)}: accel {ratios[0]:.3f} "
                          f"({'within' if ratios[0] <= 0.25 else 'NOT within'} 1/4), transformers {ratios[1]:.3f}  ")
        print()

    print("Same work (rank 0's losses; both sides start from the same weights and data):")
    print()
    print("| ranks | training | checkpointing | chunked loss | first loss accel | first loss transformers | difference | "
          f"tolerance | loss after step {a.warmup + a.steps}, accel | transformers |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    apart = []
    for world, mode, ck, chunk in rows:
        x, y = pair(world, mode, ck, chunk)
        diff = abs(x["first_loss"] - y["first_loss"])
        if diff > LOSS_TOLERANCE[mode]:
            apart.append(f"{mode}, checkpointing {on_off(ck)}, chunked loss {on_off(chunk)}: {diff:.1e}")
        print(f"| {world} | {mode} | {on_off(ck)} | {on_off(chunk)} | {x['first_loss']:.6f} | {y['first_loss']:.6f} | "
              f"{diff:.1e} | {LOSS_TOLERANCE[mode]:.0e} | {x['last_loss']:.6f} | {y['last_loss']:.6f} |")
    print()
    print(f"Initial losses equal within their tolerance: {'yes' if not apart else 'NO: ' + '; '.join(apart)}  ")
    print()
    print("Step times, median (min-max) of each launch's median step, seconds:")
    print()
    print("| ranks | training | checkpointing | chunked loss | accel | transformers |")
    print("|---|---|---|---|---|---|")
    for world, mode, ck, chunk in rows:
        cells = []
        for f in pair(world, mode, ck, chunk):
            st = f["launch_step_s"]
            cells.append(f"{statistics.median(st):.3f} ({min(st):.3f}-{max(st):.3f})")
        print(f"| {world} | {mode} | {on_off(ck)} | {on_off(chunk)} | {cells[0]} | {cells[1]} |")
    print()
    for mode, ck in [(m, c) for w, m, c in settings if w == 1 and (m, c, "accel") in profiles]:
        (xs, x), (ys, y) = profiles[mode, ck, "accel"], profiles[mode, ck, "transformers"]
        print(f"Profile, 1 rank, {mode}, checkpointing {on_off(ck)}: one step under each side's "
              f"profiler, {xs:.2f} s accel, {ys:.2f} s transformers; the operators taking the most time by their "
              "own time (less the operators they called), ms:")
        print()
        print("| operator | accel ms | transformers ms |")
        print("|---|---|---|")
        top = sorted(set(x) | set(y), key=lambda k: -max(x.get(k, 0), y.get(k, 0)))[:a.profile]
        for k in top:
            print(f"| `{k}` | {x.get(k, 0):.1f} | {y.get(k, 0):.1f} |")
        print(f"| all operators | {sum(x.values()):.1f} | {sum(y.values()):.1f} |")
        print()
    print(f"Command: `bench/finetune/run.py {' '.join(sys.argv[1:])}`".replace("run.py `", "run.py`"))
    if apart:
        raise SystemExit("the two sides' initial losses differ by more than their tolerance: they are not doing the "
                         "same work")

if __name__ == "__main__":
    with results.published("bench/finetune", "Fine-tuning against transformers + PEFT + Accelerate"
                           + (": a 1B Llama" if "--llama-1b" in sys.argv else ""),
                           "RESULTS-1b.md" if "--llama-1b" in sys.argv else "RESULTS.md"):
        main()
