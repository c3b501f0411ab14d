"""transformers' side of bench/models (run by run.py in a fresh process):
    python transformers_side.py load DIR THREADS OUT.json
    python transformers_side.py generate DIR THREADS OUT.json NEW_TOKENS REPEATS BATCHES
load: times AutoModelForCausalLM.from_pretrained(DIR, dtype=float32) alone
(after the imports) and then one forward of 8 tokens.
generate: loads the model, then per batch ("b1", "b8" of DIR/prompts.json)
one warm-up generate of 8 tokens, then REPEATS times a generate of 1 new
token (the prompt's forward: prefill) and one of NEW_TOKENS new tokens
(min_new_tokens the same, so eos never stops it), greedy, in eval and
no_grad, with generate's default cache. Writes the times and the last
run's tokens to OUT.json; the same figures as accel_side.lua.
"""
import json
import sys
import time

start_process = time.perf_counter()
import torch  # noqa: E402
import transformers  # noqa: E402

imported = time.perf_counter()
transformers.utils.logging.disable_progress_bar()


def blas():
    """The BLAS torch was built with (MKL, linked into libtorch_cpu)."""
    info = [part.split("=", 1)[1] for part in torch.__config__.show().replace(",", " ").split()
            if part.startswith("BLAS_INFO=")]
    return info[0] if info else "unknown"


def generate(model, ids, mask, new_tokens):
    with torch.no_grad():
        return model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
            do_sample=False, num_beams=1, pad_token_id=0, eos_token_id=2,
            temperature=None, top_p=None, top_k=None)


def main():
    mode, folder, threads, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(threads)
    result = {"side": "transformers", "torch": torch.__version__, "transformers": transformers.__version__,
              "threads": torch.get_num_threads(), "import_s": imported - start_process}
    t = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    result["load_s"] = time.perf_counter() - t
    result["attn_implementation"] = model.config._attn_implementation
    if mode == "load":
        ids = torch.arange(3, 11, dtype=torch.int64).view(1, 8)
        t = time.perf_counter()
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        result["first_forward_s"] = time.perf_counter() - t
        result["logits_sum"] = logits.double().sum().item()
    else:
        new_tokens, repeats, batches = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7].split(",")
        with open(folder + "/prompts.json") as f:
            prompts = json.load(f)
        for name in batches:
            ids = torch.tensor(prompts[name]["input_ids"], dtype=torch.int64)
            mask = torch.tensor(prompts[name]["attention_mask"], dtype=torch.int64)
            t = time.perf_counter()
            generate(model, ids, mask, 8)
            r = {"warmup_s": time.perf_counter() - t, "prefill_s": [], "generate_s": [], "tokens": None,
                 "tokens_same_each_repeat": True}
            for _ in range(repeats):
                t = time.perf_counter()
                generate(model, ids, mask, 1)
                r["prefill_s"].append(time.perf_counter() - t)
                t = time.perf_counter()
                out = generate(model, ids, mask, new_tokens)
                r["generate_s"].append(time.perf_counter() - t)
                new = out[:, ids.shape[1]:].tolist()
                if r["tokens"] is not None and r["tokens"] != new:
                    r["tokens_same_each_repeat"] = False
                r["tokens"] = new
            result[name] = r
    result["blas"] = blas()
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
