"""Tiny random Hugging Face checkpoints and what transformers computes on
them: the oracle of accel's pretrained-architecture parity tests.

Usage: make_checkpoints.py OUT_DIR

For each case (llama, llama_rope_llama3, llama_rope_linear, llama_rope_yarn, mistral, qwen2,
mixtral, gpt2, bert) it builds a small model from transformers' own config
class with a fixed torch seed (nothing is downloaded), saves it with
save_pretrained(safe_serialization=True) into OUT_DIR/CASE/ and writes
OUT_DIR/CASE/reference.safetensors with what transformers computes on it
(float32, eval mode, eager attention: the plain math). OUT_DIR/cases.txt
lists the cases, one a line. Token ids are 0-based, as transformers uses
them.

Decoder cases' reference tensors:
  input_ids      int64 [3, 12]  prompts of 12, 7 and 4 tokens, LEFT-padded
                                with the pad id 0
  attention_mask int64 [3, 12]  0 on the padding
  logits         f32 [3, 12, V] model(input_ids=..., attention_mask=...)
                                .logits: a plain forward, so position ids
                                are 0..11 on every row, padding or not (only
                                generate derives them from the mask). The
                                logits at padding positions are those of a
                                query that may attend to nothing (transformers
                                then attends uniformly to every key): compare
                                them only where attention_mask is 1.
  labels         int64 [3, 12]  input_ids, -100 on the padding and on each
                                padded row's first real token (which
                                transformers would otherwise predict from a
                                padding position's logits, see above)
  loss           f32 []         model(..., labels=labels).loss (mean
                                cross-entropy of the shifted labels)
  generated      int64 [3, 32]  greedy generate, 20 new tokens on every row
                                (left padding kept; positions from the mask,
                                cumsum - 1, as generate makes them)
  greedy_margin  f32 []         smallest gap, over every generated step and
                                row, between the best and second-best
                                next-token logit (at least 1e-3: the model
                                seed is advanced until it is)
  single_ids     int64 [1, 9]   one unpadded sequence
  single_logits  f32 [1, 9, V]  its logits
  aux_loss       f32 []         mixtral (output_router_logits): the
                                router's load-balancing loss of the batched
                                forward, which `loss` includes times
                                router_aux_loss_coef
bert (BertModel, no head): input_ids [3, 12] RIGHT-padded with 0,
attention_mask, token_type_ids (zeros), last_hidden_state [3, 12, 64] and
mean_pooled [3, 64] (mean over the unmasked positions, as
sentence-transformers' mean pooling).
"""
import os
import sys
import time

import torch
import transformers
from safetensors.torch import save_file

torch.set_num_threads(2)
transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()

PAD, BOS, EOS = 0, 1, 2
LENGTHS = (12, 7, 4)
SEQ = 12
NEW_TOKENS = 20
MIN_MARGIN = 1e-3
COMMON = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
    initializer_range=0.1,
    pad_token_id=PAD,
    bos_token_id=BOS,
    eos_token_id=EOS,
)

CASES = {
    "llama": (transformers.LlamaConfig, dict(
        num_key_value_heads=2, tie_word_embeddings=False)),
    "llama_rope_llama3": (transformers.LlamaConfig, dict(
        num_key_value_heads=1, tie_word_embeddings=True, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "llama_rope_linear": (transformers.LlamaConfig, dict(
        num_key_value_heads=4, tie_word_embeddings=False,
        rope_scaling={"rope_type": "linear", "factor": 2.0})),
    "llama_rope_yarn": (transformers.LlamaConfig, dict(
        num_key_value_heads=2, tie_word_embeddings=False,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16})),
    "mistral": (transformers.MistralConfig, dict(
        num_key_value_heads=2, sliding_window=6, tie_word_embeddings=False)),
    "qwen2": (transformers.Qwen2Config, dict(
        num_key_value_heads=2, tie_word_embeddings=True)),
    "mixtral": (transformers.MixtralConfig, dict(
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=None, tie_word_embeddings=False,
        output_router_logits=True, router_aux_loss_coef=0.02)),
    "gpt2": (transformers.GPT2Config, dict(
        n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=128,
        initializer_range=0.1, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)),
    "bert": (transformers.BertConfig, dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=128, max_position_embeddings=128, initializer_range=0.1, pad_token_id=PAD)),
}


def token_data(vocab, padding_side):
    """The prompts: fixed ids in [3, vocab) (never pad, bos or eos), the same
    for every case, padded to SEQ on `padding_side`."""
    g = torch.Generator().manual_seed(20240601)
    ids = torch.full((len(LENGTHS), SEQ), PAD, dtype=torch.int64)
    mask = torch.zeros((len(LENGTHS), SEQ), dtype=torch.int64)
    for row, n in enumerate(LENGTHS):
        tokens = torch.randint(3, vocab, (n,), generator=g)
        span = slice(SEQ - n, SEQ) if padding_side == "left" else slice(0, n)
        ids[row, span] = tokens
        mask[row, span] = 1
    single = torch.randint(3, vocab, (1, 9), generator=g)
    return ids, mask, single


def build(name, seed):
    config_class, options = CASES[name]
    if config_class is not transformers.GPT2Config and config_class is not transformers.BertConfig:
        options = {**COMMON, **options}
    config = config_class(**options)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    if name == "bert":
        model = transformers.BertModel(config)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.config._attn_implementation = "eager"
    return model.float().eval()


def top2_gap(logits):
    top = logits.float().topk(2, dim=-1).values
    return (top[..., 0] - top[..., 1]).min().item()


def greedy(model, ids, mask):
    """Greedy generate; returns (generated, margin, notes). The margin is
    the smallest top-1/top-2 gap over the steps' raw logits and over a
    cache-free forward of the whole generated sequence; each must pick the
    token generate picked (else the margin is reported as -1)."""
    # transformers' load-balancing loss takes the whole mask beside one
    # step's router logits and fails on a cached step: generate without it.
    router = {"output_router_logits": False} if getattr(model.config, "output_router_logits", False) else {}
    out = model.generate(
        **router,
        input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1, pad_token_id=PAD,
        eos_token_id=EOS, output_logits=True, return_dict_in_generate=True,
        temperature=None, top_p=None, top_k=None)
    generated = out.sequences
    assert generated.shape == (ids.shape[0], SEQ + NEW_TOKENS), generated.shape
    new = generated[:, SEQ:]
    steps = torch.stack(out.logits, dim=1)  # [rows, steps, vocab], before any processor
    margin = top2_gap(steps)
    notes = []
    if not torch.equal(steps.argmax(-1), new):
        # min_new_tokens masks the eos id: a seed whose greedy choice is eos
        # is refused, so no generated token is eos (nor differs from argmax).
        notes.append("generate's pick differs from its raw logits' argmax (eos?)")
        margin = -1.0
    # The same steps without the cache: positions from the mask, as generate.
    full_mask = torch.cat([mask, torch.ones_like(new)], dim=1)
    positions = (full_mask.cumsum(-1) - 1).masked_fill(full_mask == 0, 1)
    with torch.no_grad():
        again = model(input_ids=generated, attention_mask=full_mask,
                      position_ids=positions).logits[:, SEQ - 1:-1]
    notes.append("cached vs cache-free step logits differ by %.2e"
                 % (again - steps).abs().max().item())
    if not torch.equal(again.argmax(-1), new):
        notes.append("the cache-free forward picks other tokens")
        margin = -1.0
    return generated, min(margin, top2_gap(again)), notes


def decoder_reference(model):
    vocab = model.config.vocab_size
    ids, mask, single = token_data(vocab, "left")
    labels = ids.masked_fill(mask == 0, -100)
    for row in range(ids.shape[0]):
        first = int((mask[row] == 0).sum())
        if first > 0:
            labels[row, first] = -100
    with torch.no_grad():
        batched = model(input_ids=ids, attention_mask=mask)
        logits = batched.logits
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        naive_loss = model(input_ids=ids, attention_mask=mask,
                           labels=ids.masked_fill(mask == 0, -100)).loss
        single_logits = model(input_ids=single).logits
    generated, margin, notes = greedy(model, ids, mask)
    if margin >= MIN_MARGIN:
        assert not (generated[:, SEQ:] == EOS).any()
    notes.append("loss %.6f (with the first real tokens' labels too: %.6f)"
                 % (loss.item(), naive_loss.item()))
    extra = {}
    if getattr(batched, "aux_loss", None) is not None:
        extra["aux_loss"] = batched.aux_loss.float().reshape(())
    return {
        **extra,
        "input_ids": ids,
        "attention_mask": mask,
        "logits": logits.float().contiguous(),
        "labels": labels,
        "loss": loss.float().reshape(()),
        "generated": generated.contiguous(),
        "greedy_margin": torch.tensor(margin, dtype=torch.float32),
        "single_ids": single,
        "single_logits": single_logits.float().contiguous(),
    }, margin, notes


def bert_reference(model):
    ids, mask, _ = token_data(model.config.vocab_size, "right")
    token_types = torch.zeros_like(ids)
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask,
                       token_type_ids=token_types).last_hidden_state.float()
    weights = mask.unsqueeze(-1).float()
    pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": token_types,
        "last_hidden_state": hidden.contiguous(),
        "mean_pooled": pooled.contiguous(),
    }


def make_case(out_dir, name):
    start = time.time()
    case_dir = os.path.join(out_dir, name)
    for seed in range(100):
        model = build(name, seed)
        if name == "bert":
            tensors, margin, notes = bert_reference(model), None, []
            break
        tensors, margin, notes = decoder_reference(model)
        if margin >= MIN_MARGIN:
            break
        print(f"  {name}: seed {seed} greedy margin {margin:.2e} is too small, next seed"
              + "".join(f"; {note}" for note in notes[:1] if margin < 0))
    else:
        raise SystemExit(f"{name}: no seed below 100 gives a greedy margin of {MIN_MARGIN}")
    model.save_pretrained(case_dir, safe_serialization=True)
    save_file(tensors, os.path.join(case_dir, "reference.safetensors"),
              metadata={"case": name, "seed": str(seed),
                        "transformers": transformers.__version__, "torch": torch.__version__})
    line = f"{name}: seed {seed}"
    if margin is not None:
        line += f", greedy margin {margin:.4f}"
    print(f"{line}, {time.time() - start:.2f} s")
    for note in notes:
        print(f"  {note}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_checkpoints.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    start = time.time()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    for name in CASES:
        make_case(out_dir, name)
    with open(os.path.join(out_dir, "cases.txt"), "w") as f:
        f.write("".join(name + "\n" for name in CASES))
    print(f"{len(CASES)} cases in {out_dir}, {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
