#!/usr/bin/env bash
# Hostile downloads: model folders, tokenizers and adapters as a stranger
# could publish them (tests/launch/hostile_download.lua makes each). Every
# one must end within 10 s with an error naming the file (and the key,
# tensor or pattern), no crash, peak memory under 1 GB (the tiny models
# here weigh kilobytes; accel-run itself takes about 170 MB), and nothing
# left running.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/hostile_download.lua"

# hostile CASE: runs the case, setting $status, $out, $err, $elapsed and $peak_kb.
hostile() {
  local start=$SECONDS case_dir
  case_dir=$(mktemp -d "$work/case.XXXX")
  /usr/bin/time -f "%M" -o "$work/rss" timeout -k 2 10 "$accel_run" "$recipe" -- "$1" "$case_dir" \
    >"$work/out" 2>"$work/err"
  status=$?
  elapsed=$((SECONDS - start))
  out=$(cat "$work/out")
  err=$(cat "$work/err")
  peak_kb=$(tail -1 "$work/rss" | tr -dc 0-9)
}

# refused CASE TEXT...: the case fails with a recipe error holding every TEXT.
refused() {
  local what=$1; shift
  hostile "$what"
  local ok=1
  [ "$status" -eq 1 ] || ok=0
  for text in "$@"; do contains "$err" "$text" || ok=0; done
  expect "$what: refused (status $status, ${elapsed} s), naming ${*}" [ "$ok" -eq 1 ]
  expect "$what: peak memory $((peak_kb / 1024)) MB, under 1 GB" [ "${peak_kb:-0}" -lt 1048576 ]
  expect "$what: nothing left running" no_survivors
}

echo 'os.exit(accel.tokenizers.sentencepiece_available() and 0 or 3)' >"$work/sentencepiece.lua"
"$accel_run" "$work/sentencepiece.lua" 2>/dev/null
sentencepiece=$?
if [ "$sentencepiece" -eq 0 ]; then
  refused "charsmap" "tokenizer.model': normalizer_spec.precompiled_charsmap is not a valid character map" \
    "past the trie"
else
  echo "not checked: charsmap (this build has no SentencePiece)"
fi

for file in tokenizer.json tokenizer_config.json special_tokens_map.json generation_config.json \
            adapter_config.json adapter_model.safetensors; do
  refused "fifo $file" "/$file' is not a regular file (a FIFO)"
done
if [ "$sentencepiece" -eq 0 ]; then
  refused "fifo tokenizer.model" "/tokenizer.model' is not a regular file (a FIFO)"
fi
refused "fifo data file" "/train.txt' is not a regular file (a FIFO)"
refused "/dev/zero data file" "'/dev/zero' is not a regular file (a device)"
refused 'data file named \xff' '/bad\xff.txt'"' is not a regular file (a FIFO)"
expect "data file named \\xff: the byte is escaped, never raw" test "$(printf '%s' "$err" | LC_ALL=C grep -c $'\xff')" -eq 0

refused "growing normalizers" "tokenizer.json': normalizer.normalizers[" "(Replace)" "more than 16 times its input"
refused "growing decoders" "tokenizer.json': decoder.decoders[" "(Replace)" "more than 16 times its input"

hostile "long added token"
expect "long added token: found in time linear in the text (status $status, ${elapsed} s)" \
  contains "$out" "loaded"
refused "costly split pattern" "tokenizer.json': pre_tokenizer.pattern" "(?:a|a){18}b|." "steps of matching"

refused "num_hidden_layers" "config.json': num_hidden_layers is 100000" "the checkpoint holds 2"
refused "n_layer" "config.json': n_layer is 100000" "the checkpoint holds 2"
refused "num_local_experts" "config.json': num_local_experts is 100000" "the checkpoint holds 2"
refused "adapter r" "adapter_config.json': r is 5000000" "adapter_model.safetensors" "rank 2"
refused "adapter int8" "adapter_model.safetensors" "not floating point" "lora_A.weight' is int8 in the file"
refused "target_modules regex" "target_modules" "the pattern '(.|.)*(y|z)' failed on" "match limit exceeded"

refused "do_sample string" "generation_config.json': do_sample" "a boolean"
refused "temperature string" "generation_config.json': temperature" "a number"
refused "max_new_tokens file" "generation_config.json': max_new_tokens 1000000000000" "max_position_embeddings"
refused "max_new_tokens call" "max_new_tokens 1000000000000" "max_position_embeddings"

finish
