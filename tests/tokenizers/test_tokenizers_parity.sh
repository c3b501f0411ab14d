# accel.tokenizers against Hugging Face tokenizers and sentencepiece: the
# tokenizers that make_tokenizers.py trains on local text (byte-level BPE in
# the GPT-2, Llama 3, Qwen2 and SmolLM layouts, byte-fallback BPE in Llama
# 2's and Mistral's, the parts those leave out, a SentencePiece model) and
# the real all-MiniLM-L6-v2 BERT tokenizer; nothing downloaded. accel's ids,
# decoded text and padded, truncated batches must equal the reference's on
# make_corpus.py's corpus and on a sweep over every code point Unicode 14.0
# assigns (parity.lua), and what save_pretrained writes must read back in
# the reference libraries (check_saved.py).
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/../models/transformers_venv.sh"
tokenizers_dir="$source_root/tests/tokenizers"

if "$oracle_python" "$tokenizers_dir/make_corpus.py" "$work/corpus.json" >"$work/make.log" 2>&1 &&
   "$oracle_python" "$tokenizers_dir/make_tokenizers.py" "$work/corpus.json" "$work/ref" >>"$work/make.log" 2>&1; then
  pass "tokenizers and sentencepiece trained the tokenizers and wrote what they give"
else
  out=$(cat "$work/make.log") err=""
  fail "tokenizers and sentencepiece trained the tokenizers and wrote what they give"
  finish; exit
fi

timeout 240 "$accel_run" --threads 2 "$tokenizers_dir/parity.lua" -- "$work/ref" "$work/corpus.json" "$work/saved" \
  >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "accel's ids, texts and batches equal the reference's for every tokenizer" [ "$status" -eq 0 ]

if out=$("$oracle_python" "$tokenizers_dir/check_saved.py" "$work/ref" "$work/saved" "$work/corpus.json" 2>&1); then
  echo "$out"
  pass "the reference libraries read back what save_pretrained wrote"
else
  err=""
  fail "the reference libraries read back what save_pretrained wrote"
fi
finish
