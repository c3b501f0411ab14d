# Fine-tuning data and losses against TRL's SFTTrainer with padding-free
# packing: on a tiny Llama transformers makes from a config with a seed and
# the byte-level tokenizer fixture, prompt-completion records packed by
# TokenizedDataset equal TRL's packed rows (tokens, labels, position_ids)
# and 10 AdamW steps give TRL's losses within the measured tolerance
# (sft_parity.lua, make_sft_reference.py); and the same for conversations
# through a chat template with assistant_only_loss.
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/transformers_venv.sh"
models_dir="$source_root/tests/models"

# Prompt-completion records of varied lengths: some longer than a row (cut),
# most packed several to a row.
words=(the cat sat on a mat dog ran in park we like green tea sun is warm today bird sings)
# RANDOM is drawn in this shell only: bash reseeds it in every subshell, so
# a draw inside $(...) would change the records from run to run.
RANDOM=7
for i in $(seq 56); do
  prompt="" completion=""
  n=$((RANDOM % 4 + 1)); for ((j = 0; j < n; j++)); do prompt="$prompt${prompt:+ }${words[RANDOM % ${#words[@]}]}"; done
  n=$((RANDOM % 5 + 1)); for ((j = 0; j < n; j++)); do completion="$completion ${words[RANDOM % ${#words[@]}]}"; done
  printf '{"prompt": "%s", "completion": "%s"}\n' "$prompt" "$completion"
done >"$work/data.jsonl"

if "$oracle_python" "$models_dir/make_sft_reference.py" "$source_root/tests/tokenizers/fixtures/byte_level" \
     "$work/data.jsonl" "$work/ref" >"$work/make.log" 2>&1; then
  pass "TRL trained 10 steps and wrote its rows and losses"
else
  out=$(tail -20 "$work/make.log") err=""
  fail "TRL trained 10 steps and wrote its rows and losses"
  finish; exit
fi

timeout 240 "$accel_run" --threads 2 "$models_dir/sft_parity.lua" -- "$work/ref" "$work/data.jsonl" \
  >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "accel's packed rows and 10 steps' losses are TRL's" [ "$status" -eq 0 ]

# Conversations through a ChatML template with generation blocks, the loss
# on the assistant's turns alone (TRL's assistant_only_loss).
cat >"$work/template.jinja" <<'TEMPLATE'
{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<|endoftext|>{% endgeneration %}{% else %}{{ m.content }}<|endoftext|>{% endif %}
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}
TEMPLATE
sed 's/^{"prompt": \(.*\), "completion": " \(.*\)"}$/{"messages": [{"role": "user", "content": \1}, {"role": "assistant", "content": "\2"}]}/' \
  "$work/data.jsonl" >"$work/chats.jsonl"
if "$oracle_python" "$models_dir/make_sft_reference.py" "$source_root/tests/tokenizers/fixtures/byte_level" \
     "$work/chats.jsonl" "$work/chat_ref" "$work/template.jinja" >"$work/make_chat.log" 2>&1; then
  pass "TRL trained 10 steps on the conversations"
else
  out=$(tail -20 "$work/make_chat.log") err=""
  fail "TRL trained 10 steps on the conversations"
  finish; exit
fi
timeout 240 "$accel_run" --threads 2 "$models_dir/sft_parity.lua" -- "$work/chat_ref" "$work/chats.jsonl" chat \
  >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "with assistant_only_loss on conversations, the rows and losses are TRL's" [ "$status" -eq 0 ]
finish
