"""A tiny Llama checkpoint with its own tokenizer, and what transformers
generates from recipes/generate_pretrained.lua's prompts, for
test_generate_pretrained.sh.
  make_generate_reference.py RECIPE OUT_DIR MAX_NEW_TOKENS
Writes OUT_DIR/model (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json; a byte-level BPE tokenizer that `tokenizers` trains
on local text, nothing downloaded) and OUT_DIR/expected.txt: the lines the
recipe prints, "[i] prompt + generated text", from transformers' greedy
generate of the left-padded batch and tokenizers' decode."""
import re
import sys

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

recipe, out, new_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
prompts = re.findall(r'^  "(.*)",$', open(recipe, encoding="utf-8").read(), re.M)
assert len(prompts) >= 4, prompts

text = [
    "The capital of France is Paris, and the capital of Italy is Rome.",
    "Once upon a time, there was a small village by the sea.",
    "def fibonacci(n): return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "The three primary colours are red, yellow and blue.",
    "In 1969, astronauts walked on the Moon for the first time.",
    "A good recipe for bread needs flour, water, salt and yeast.",
] * 20
bpe = Tokenizer(models.BPE())
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
bpe.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"],
                                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", bos_token="<s>",
                                           eos_token="</s>")
torch.manual_seed(0)
config = transformers.LlamaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=64, intermediate_size=128,
                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=2, initializer_range=0.1)
model = transformers.LlamaForCausalLM(config).eval()
model.save_pretrained(out + "/model")
tok.save_pretrained(out + "/model")

tok.padding_side = "left"
batch = tok(prompts, return_tensors="pt", padding=True)
with torch.no_grad():
    generated = model.generate(**batch, max_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
                               eos_token_id=2)
length = batch["input_ids"].shape[1]
with open(out + "/expected.txt", "w", encoding="utf-8") as f:
    for i, prompt in enumerate(prompts):
        f.write(f"[{i + 1}] {prompt}{tok.decode(generated[i, length:], skip_special_tokens=True)}\n")
print(open(out + "/expected.txt", encoding="utf-8").read())
