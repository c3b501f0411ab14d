"""TRL's SFTTrainer with padding-free packing, the oracle of sft_parity.lua.

From a tiny Llama transformers makes from a config with a seed (nothing
downloaded) and the byte-level tokenizer fixture, SFTTrainer trains 10 steps
on the prompt-completion records of DATA: packing=True (best-fit decreasing
rows of max_length 32, 64 for conversations, padding_free: each batch flattened into one row with
position_ids restarting at each example), completion_only_loss, AdamW
(lr 1e-3, no weight decay), a constant learning rate, gradients clipped to
norm 1, batches in the dataset's order (the sampler made sequential so that
accel can take the same rows). Writes OUT/model (the initial checkpoint and
tokenizer) and OUT/reference.json: each step's loss at full precision, and
each step's flattened input_ids and labels. With a TEMPLATE file, the
records are conversations ({"messages": [...]}) rendered by that chat
template (set on the tokenizer and saved with it), the loss on the
assistant's turns alone (assistant_only_loss, from its generation blocks).

    python make_sft_reference.py FIXTURE_DIR DATA OUT [TEMPLATE]
"""
import json
import os
import sys

import datasets
import torch
import transformers
import trl
from torch.utils.data import SequentialSampler

fixture, data, out = sys.argv[1:4]
template = open(sys.argv[4]).read() if len(sys.argv) > 4 else None
os.makedirs(out, exist_ok=True)

tok = transformers.AutoTokenizer.from_pretrained(fixture)
tok.pad_token = tok.eos_token
if template is not None:
    tok.chat_template = template
torch.manual_seed(0)
config = transformers.LlamaConfig(
    vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=128, bos_token_id=tok.bos_token_id,
    eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=False,
    initializer_range=0.2)
model = transformers.LlamaForCausalLM(config)
model.save_pretrained(f"{out}/model")
tok.save_pretrained(f"{out}/model")

records = [json.loads(line) for line in open(data) if line.strip()]
dataset = datasets.Dataset.from_list(records)

steps = []


class Recorded(trl.SFTTrainer):
    def _get_train_sampler(self, *args, **kwargs):
        return SequentialSampler(self.train_dataset)

    def compute_loss(self, model, inputs, *args, **kwargs):
        result = super().compute_loss(model, inputs, *args, **kwargs)
        loss = result[0] if isinstance(result, tuple) else result
        steps.append({"loss": loss.item(), "input_ids": inputs["input_ids"][0].tolist(),
                      "labels": inputs["labels"][0].tolist(), "position_ids": inputs["position_ids"][0].tolist()})
        return result


args = trl.SFTConfig(
    output_dir=f"{out}/trl", max_length=32 if template is None else 64, packing=True, padding_free=True, completion_only_loss=True,
    assistant_only_loss=template is not None, per_device_train_batch_size=2, max_steps=10, learning_rate=1e-3, lr_scheduler_type="constant",
    warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, adam_epsilon=1e-8, logging_steps=1, report_to=[],
    save_strategy="no", seed=0, use_cpu=True, bf16=False, fp16=False, dataloader_drop_last=False,
    remove_unused_columns=True, dataset_num_proc=None)
trainer = Recorded(model=model, args=args, train_dataset=dataset, processing_class=tok)
trainer.train()
json.dump({"steps": steps, "rows": len(trainer.train_dataset)}, open(f"{out}/reference.json", "w"))
print(f"TRL trained {len(steps)} steps on {len(trainer.train_dataset)} packed rows")
