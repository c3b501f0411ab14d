"""transformers + PEFT + Accelerate's side of bench/finetune (run.py starts it,
on one process or under torch.distributed.run with Gloo):
    python transformers_side.py SPEC.json OUT_PREFIX
    python transformers_side.py --save-adapter SPEC.json ADAPTER_DIR
SPEC.json (written by run.py) names the checkpoint, the data, the mode
("full", "lora" (float32), "lora-bf16" (the base in bfloat16) or "qlora"
(the base in 4 bits: nf4, double quantization, bfloat16 compute, then
PEFT's prepare_model_for_kbit_training), the last two from the initial
adapter saved for "lora"), checkpointing, the LoRA settings, AdamW's settings, the
threads and the warm-up and timed steps. Each rank writes
OUT_PREFIX.<rank>.json with the same figures as accel_side.lua.
--save-adapter writes the initial adapter (get_peft_model after seeding)
that accel_side.lua loads, so both sides start from the same weights.
"""
import importlib.metadata
import json
import os
import sys
import time

import torch
import transformers
from accelerate import Accelerator
from peft import LoraConfig, PeftModel, get_peft_model, prepare_model_for_kbit_training
from torch.profiler import ProfilerActivity, profile

MiB = 2 ** 20


def status(key):
    """A /proc/self/status figure in bytes (VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def reset_peak_rss():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def lora_model(model, spec):
    torch.manual_seed(spec["seed"])
    config = LoraConfig(r=spec["lora_r"], lora_alpha=spec["lora_alpha"], lora_dropout=0.0,
                        target_modules=spec["lora_targets"], task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def base_model(spec):
    """The checkpoint as spec's mode loads it, before its adapters."""
    if spec["mode"] == "qlora":
        quantization = transformers.BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            spec["checkpoint"], dtype=torch.bfloat16, device_map="cpu", quantization_config=quantization)
        model.config.use_cache = False
        # The same checkpointing as the other modes (transformers' default, not reentrant).
        return prepare_model_for_kbit_training(model, use_gradient_checkpointing=spec["checkpointing"],
                                               gradient_checkpointing_kwargs={"use_reentrant": False})
    dtype = torch.bfloat16 if spec["mode"] == "lora-bf16" else torch.float32
    model = transformers.AutoModelForCausalLM.from_pretrained(spec["checkpoint"], dtype=dtype)
    model.config.use_cache = False
    if spec["checkpointing"]:
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable()  # transformers' default: torch.utils.checkpoint with use_reentrant=False
    return model


def kept_after_forward(model, ids):
    """Bytes a forward leaves allocated for backward (and the loss): the sum
    of every allocation and free the profiler saw during it."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        loss = model(input_ids=ids, labels=ids).loss
    kept = sum(e.self_cpu_memory_usage for e in prof.key_averages())
    del loss
    return kept


def main():
    if sys.argv[1] == "--save-adapter":
        with open(sys.argv[2]) as f:
            spec = json.load(f)
        model = transformers.AutoModelForCausalLM.from_pretrained(spec["checkpoint"], dtype=torch.float32)
        lora_model(model, spec).save_pretrained(sys.argv[3])
        return
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    out_prefix = sys.argv[2]
    torch.set_num_threads(spec["threads"])
    rss_start = status("VmRSS")
    accelerator = Accelerator(cpu=True)
    rank, world = accelerator.process_index, accelerator.num_processes
    with open(spec["data"]) as f:
        batches = json.load(f)["batches"]

    model = base_model(spec)
    if spec["mode"] == "lora":
        model = lora_model(model, spec)
    elif spec["mode"] != "full":  # the adapter saved for "lora", its weights float32 (autocast_adapter_dtype)
        model = PeftModel.from_pretrained(model, spec["adapter"], is_trainable=True)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    a = spec["adamw"]
    optimizer = torch.optim.AdamW(trainable, lr=a["lr"], betas=tuple(a["betas"]), eps=a["eps"],
                                  weight_decay=a["weight_decay"])
    model, optimizer = accelerator.prepare(model, optimizer)

    rss_prepared, peak_setup = status("VmRSS"), status("VmHWM")
    reset_peak_rss()

    def train_step(step):
        """One step on the step-th batch (0-based): its seconds and its loss."""
        ids = torch.tensor(batches[step * world + rank], dtype=torch.int64)
        start = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        return time.perf_counter() - start, loss.item()

    losses, times = [], []
    for step in range(spec["warmup"] + spec["steps"]):
        elapsed, loss = train_step(step)
        losses.append(loss)
        if step >= spec["warmup"]:
            times.append(elapsed)
    peak_training = status("VmHWM")
    trace = profiled_step_s = None
    if spec.get("profile"):  # run.py --profile: one more step under torch's profiler, its trace kept
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            profiled_step_s, _ = train_step(spec["warmup"] + spec["steps"] - 1)
        os.makedirs(spec["profile"], exist_ok=True)
        trace = f"{spec['profile']}/trace_{rank}.json"
        prof.export_chrome_trace(trace)

    result = {
        "side": "transformers", "rank": rank, "world": world, "threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "peft": __import__("peft").__version__, "accelerate": __import__("accelerate").__version__,
        "bitsandbytes": importlib.metadata.version("bitsandbytes"),
        "distributed_type": str(accelerator.distributed_type),
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable": sum(p.numel() for p in trainable),
        "losses": losses, "step_s": times,
        "rss_start": rss_start, "rss_prepared": rss_prepared,
        "peak_rss_setup": peak_setup, "peak_rss_training": peak_training, "trace": trace,
        "profiled_step_s": profiled_step_s,
    }
    if world == 1 and spec["kept_after_forward"]:
        ids = torch.tensor(batches[0], dtype=torch.int64)
        result["kept_after_forward"] = kept_after_forward(model, ids)
    with open(f"{out_prefix}.{rank}.json", "w") as f:
        json.dump(result, f)
    accelerator.end_training()


if __name__ == "__main__":
    main()
