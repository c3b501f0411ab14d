# recipes/finetune.lua end to end, without Python: on a tiny random Llama
# that accel makes (finetune_make_model.lua) and a JSONL file of repeated
# sentences, 2 processes fine-tune LoRA adapters with gradient
# checkpointing and accumulation:
# - the loss falls; the adapter folder loads (accel.peft.from_pretrained)
#   and generates the sample the recipe printed;
# - a run killed while saving its second checkpoint and resumed with
#   --resume from its first gives the uninterrupted run's losses and
#   adapter (logits within 1e-6);
# - a full fine-tune in bf16 writes a model folder that loads;
# - prompt-completion records (--completion_key) train and sample from the
#   first prompt;
# - conversations (--chat --assistant_only_loss --packing) train on 2
#   processes through the folder's chat template;
# - bad input (a missing model folder, a JSONL line that is not JSON or has
#   no "text", an unknown option, an output folder holding checkpoints) is
#   an error naming it.
source "$(dirname "$0")/../launch/lib.sh"
recipe="$source_root/recipes/finetune.lua"
here="$source_root/tests/models"

run_accel "$here/finetune_make_model.lua" --threads 1 -- "$work/base"
expect "accel makes the tiny Llama checkpoint" [ "$status" -eq 0 -a -f "$work/base/model.safetensors" ]

sentences=("the cat sat on the mat" "a dog ran in the park" "we like green tea" "the sun is warm today")
for i in $(seq 8); do
  for s in "${sentences[@]}"; do printf '{"text": "%s"}\n' "$s"; done
done >"$work/data.jsonl"

# "step K/N  loss X ..." lines: the losses, one a line.
losses() { awk '$1 == "step" { print $4 }' "$1"; }
sample() { grep '^sample: ' "$1"; }
# The last run succeeded and printed $1; or failed with $1 (and $2) in its errors.
ran_with() { [ "$status" -eq 0 ] && contains "$out" "$1"; }
fails_with() { [ "$status" -ne 0 ] && contains "$err" "$1" && contains "$err" "${2:-$1}"; }
# The number after WORD in file FILE passes the awk test TEST on x.
number_after() { awk -v w="$1" '$1 == w { found = 1; x = $2; ok = ('"$2"') } END { exit !(found && ok) }' "$3"; }
# Each line of file 2 within 1e-6 of the same line of file 1, and as many.
same_numbers() {
  awk 'NR == FNR { a[FNR] = $1; n = FNR; next }
       { d = a[FNR] - $1; if (d < 0) d = -d; if (d > 1e-6 || !(FNR in a)) { bad = 1; exit } m = FNR }
       END { exit bad || !(m == n && n > 0) }' "$1" "$2"
}
# The losses tracked in metrics.jsonl from step FROM on, one a line.
tracked_from() {
  sed -n 's/.*"step": *\([0-9]*\).*"loss": *\([-0-9.eE+]*\).*/\1 \2/p' "$1" | awk -v from="$2" '$1 >= from { print $2 }'
}

lora=(--nproc 2 --threads 1 -- "$work/base" "$work/data.jsonl" --target_modules all-linear --gradient_checkpointing
      --grad_accum 2 --batch_size 2 --max_steps 16 --save_steps 3 --log_every 1 --lr 3e-2
      --sample_prompt "the cat" --sample_tokens 6)

run_accel "$recipe" "${lora[@]}" --output_dir "$work/a"
cp "$work/out" "$work/a.out"
expect "LoRA fine-tuning runs on 2 processes" [ "$status" -eq 0 ]
losses "$work/a.out" >"$work/a.losses"
first=$(head -1 "$work/a.losses")
last=$(tail -1 "$work/a.losses")
expect "it reports 16 updates" [ "$(wc -l <"$work/a.losses")" -eq 16 ]
expect "the loss falls below a quarter of the first update's ($first -> $last)" \
  awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f / 4) }'
expect "the adapter is saved in PEFT's files, with the tokenizer" \
  [ -f "$work/a/model/adapter_config.json" -a -f "$work/a/model/adapter_model.safetensors" \
    -a -f "$work/a/model/tokenizer.json" -a ! -e "$work/a/model/model.safetensors" ]
expect "the jsonl tracker logged every update" [ "$(grep -c '"loss"' "$work/a/logs/metrics.jsonl")" -eq 16 ]
expect "the newest 2 of its 5 checkpoints are kept" \
  [ -d "$work/a/checkpoints/checkpoint_3" -a -d "$work/a/checkpoints/checkpoint_4" -a ! -e "$work/a/checkpoints/checkpoint_2" ]

run_accel "$here/finetune_check.lua" --threads 1 -- "$work/base" "$work/a/model" "the cat" 6
cp "$work/out" "$work/a.check"
expect "the saved adapter loads" [ "$status" -eq 0 ]
expect "and generates the recipe's sample ($(sample "$work/a.out"))" \
  [ -n "$(sample "$work/a.out")" -a "$(sample "$work/a.check")" = "$(sample "$work/a.out")" ]
expect "the adapter changes the base model's logits" number_after moved "x > 1e-3" "$work/a.check"

# Killed (SIGKILL on rank 0) while saving the checkpoint of update 6; the
# newest complete one is then update 3's, in the middle of an epoch (4
# updates an epoch: 32 rows, 2 a batch, 2 processes, 2 micro-batches).
ACCEL_FAULT_INJECT=checkpoint-before-commit@2 run_accel "$recipe" "${lora[@]}" --output_dir "$work/b"
expect "the second save is killed" [ "$status" -ne 0 -a -d "$work/b/checkpoints/checkpoint_0" \
                                     -a ! -e "$work/b/checkpoints/checkpoint_1" ]
run_accel "$recipe" "${lora[@]}" --output_dir "$work/b"
expect "without --resume the recipe refuses the folder holding checkpoints" \
  fails_with "'$work/b' holds checkpoints of an earlier run: pass --resume"
run_accel "$recipe" "${lora[@]}" --output_dir "$work/b" --resume
cp "$work/out" "$work/b.out"
expect "--resume continues from the update-3 checkpoint" ran_with "resumed from $work/b/checkpoints/checkpoint_0"
losses "$work/b.out" >"$work/b.losses"
tail -n 13 "$work/a.losses" >"$work/a.losses.tail"
expect "it reports updates 4 to 16 with the uninterrupted run's losses" same_numbers "$work/a.losses.tail" "$work/b.losses"
tracked_from "$work/a/logs/metrics.jsonl" 4 >"$work/a.tracked"
tracked_from "$work/b/logs/metrics.jsonl" 4 | tail -n 13 >"$work/b.tracked"
expect "within 1e-6 at the tracker's full precision" same_numbers "$work/a.tracked" "$work/b.tracked"
run_accel "$here/finetune_check.lua" --threads 1 -- "$work/base" "$work/b/model" "the cat" 6 "$work/a/model"
expect "and its adapter gives the uninterrupted run's logits within 1e-6" number_after differ "x <= 1e-6" "$work/out"

run_accel "$recipe" --nproc 2 --threads 1 -- "$work/base" "$work/data.jsonl" --full --bf16 --max_steps 2 \
  --batch_size 4 --lr 1e-3 --sample_prompt "the cat" --sample_tokens 6 --output_dir "$work/c"
cp "$work/out" "$work/c.out"
expect "a full fine-tune in bf16 runs 2 updates" ran_with "step 2/2"
expect "it saves the whole model with the tokenizer" \
  [ -f "$work/c/model/model.safetensors" -a -f "$work/c/model/config.json" -a -f "$work/c/model/tokenizer.json" ]
run_accel "$here/finetune_check.lua" --threads 1 -- "$work/base" "$work/c/model" "the cat" 6
expect "which loads and generates the recipe's sample" \
  [ "$status" -eq 0 -a -n "$(sample "$work/c.out")" -a "$(sample "$work/out")" = "$(sample "$work/c.out")" ]
expect "its weights changed" number_after moved "x > 0" "$work/out"

# Prompt-completion records: the loss on the completions alone, and the
# sample generated from the first record's prompt.
for i in $(seq 8); do
  printf '{"prompt": "the cat", "completion": " sat on the mat"}\n{"prompt": "a dog", "completion": " ran in the park"}\n'
done >"$work/pairs.jsonl"
run_accel "$recipe" --nproc 1 --threads 1 -- "$work/base" "$work/pairs.jsonl" --completion_key completion \
  --target_modules all-linear --batch_size 4 --max_steps 8 --log_every 1 --lr 3e-2 --sample_tokens 6 \
  --output_dir "$work/e"
cp "$work/out" "$work/e.out"
losses "$work/e.out" >"$work/e.losses"
expect "prompt-completion fine-tuning runs 8 updates" [ "$status" -eq 0 -a "$(wc -l <"$work/e.losses")" -eq 8 ]
expect "its loss falls below a quarter of the first update's" \
  awk -v f="$(head -1 "$work/e.losses")" -v l="$(tail -1 "$work/e.losses")" 'BEGIN { exit !(l < f / 4) }'
expect "the sample continues the first record's prompt ($(sample "$work/e.out"))" \
  contains "$(sample "$work/e.out")" "sample: the cat"

# Conversations (--chat): JSONL with "messages", the model folder's chat
# template (generation blocks mark the replies), the loss on the replies
# alone (--assistant_only_loss), packed, on 2 processes.
cp -r "$work/base" "$work/chat_base"
cat >"$work/chat_base/chat_template.jinja" <<'TEMPLATE'
{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<|endoftext|>{% endgeneration %}{% else %}{{ m.content }}<|endoftext|>{% endif %}
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}
TEMPLATE
for i in $(seq 8); do
  printf '{"messages": [{"role": "user", "content": "the cat"}, {"role": "assistant", "content": "sat on the mat"}]}\n'
  printf '{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a dog"}, '
  printf '{"role": "assistant", "content": "ran"}, {"role": "user", "content": "where"}, '
  printf '{"role": "assistant", "content": "in the park"}]}\n'
done >"$work/chats.jsonl"
run_accel "$recipe" --nproc 2 --threads 1 -- "$work/chat_base" "$work/chats.jsonl" --chat --assistant_only_loss \
  --packing --max_length 64 --target_modules all-linear --batch_size 2 --max_steps 8 --log_every 1 --lr 3e-2 \
  --sample_prompt "the cat" --sample_tokens 6 --output_dir "$work/f"
cp "$work/out" "$work/f.out"
losses "$work/f.out" >"$work/f.losses"
expect "chat fine-tuning runs 8 updates on 2 processes" [ "$status" -eq 0 -a "$(wc -l <"$work/f.losses")" -eq 8 ]
expect "its loss falls below a quarter of the first update's" \
  awk -v f="$(head -1 "$work/f.losses")" -v l="$(tail -1 "$work/f.losses")" 'BEGIN { exit !(l < f / 4) }'
expect "the sample answers a user turn through the template ($(sample "$work/f.out"))" \
  contains "$(sample "$work/f.out")" "sample: <|im_start|>user"
run_accel "$recipe" --threads 1 -- "$work/base" "$work/chats.jsonl" --chat --output_dir "$work/g"
expect "--chat with a model folder without a chat template is an error saying so" \
  fails_with "holds conversations, which need a tokenizer with a chat template"

# Bad input.
run_accel "$recipe" --threads 1 -- "$work/nothing" "$work/data.jsonl" --output_dir "$work/d"
expect "a missing model folder is an error naming it" fails_with "'$work/nothing' is not a folder"
printf '{"text": "fine"}\n\n{"text": "cut short"\n' >"$work/broken.jsonl"
run_accel "$recipe" --threads 1 -- "$work/base" "$work/broken.jsonl" --output_dir "$work/d"
expect "a line that is not JSON is an error naming the file and the line" \
  fails_with "'$work/broken.jsonl' line 3" "not valid JSON"
printf '{"text": "fine"}\n{"content": "no text"}\n' >"$work/keyless.jsonl"
run_accel "$recipe" --threads 1 -- "$work/base" "$work/keyless.jsonl" --output_dir "$work/d"
expect "a line without \"text\" is an error naming the file and the line" \
  fails_with "'$work/keyless.jsonl' line 2 has no \"text\""
run_accel "$recipe" --threads 1 -- "$work/base" "$work/data.jsonl" --learning_rate 1
expect "an unknown option is an error naming it" fails_with "unknown option '--learning_rate'"

# QLoRA: the base in 4 bits, gradient checkpointing, the loss falls.
run_accel "$recipe" --threads 1 -- "$work/base" "$work/data.jsonl" --load_in_4bit --gradient_checkpointing \
  --max_steps 6 --log_every 2 --lr 1e-2 --output_dir "$work/qlora"
echo "$out" | losses /dev/stdin >"$work/qlora_losses"
expect "--load_in_4bit fine-tunes adapters on a 4-bit base" ran_with "QLoRA fine-tuning"
expect "and its loss falls" awk 'NR == 1 { first = $1 } { last = $1 } END { exit !(NR == 3 && last < first) }' \
  "$work/qlora_losses"
run_accel "$recipe" --threads 1 -- "$work/base" "$work/data.jsonl" --load_in_4bit --full
expect "--load_in_4bit with --full is an error" fails_with "--load_in_4bit trains adapters"
finish
