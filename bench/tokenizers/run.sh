#!/usr/bin/env bash
# Tokenizer encoding throughput: accel against Hugging Face tokenizers on
# the same machine, in one run, each on one thread.
#
#   bench/tokenizers/run.sh [--repeats N] [--build DIR]
#
# make_text.py writes 10 MB of local text and trains a byte-level BPE
# (GPT-2's layout, 32,000 tokens) on half of it; hf_encode.py and
# encode.lua encode it, no special tokens, as one text and line by line,
# best of N (default 3). Prints MB/s (10^6 bytes of UTF-8 a second) for
# each, and fails unless both give the same ids (count and digest). The
# reference runs from the test-only oracle environment
# (tests/models/transformers_venv.sh makes it; PyPI is needed once).
# It writes its figures, with the machine and date, to
# bench/tokenizers/RESULTS.md (bench/results.py) when both give the same ids.
set -euo pipefail
cd "$(dirname "$0")/../.."
command="bench/tokenizers/run.sh $*"
repeats=3
build=build
while (($#)); do
  case "$1" in
    --repeats) repeats=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
python=${ACCEL_ORACLE_VENV:-$HOME/.cache/accel/transformers-venv}/bin/python
if ! "$python" -c "import tokenizers" 2>/dev/null; then
  echo "run.sh: no oracle environment at $python: run tests/models/transformers_venv.sh's test first" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" bench/tokenizers/make_text.py "$work"
exec 3>&1 >"$work/results.md"  # the figures, shown and published at the end
echo "Load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tokenizers $("$python" -c 'import tokenizers; print(tokenizers.__version__)'), accel $(git rev-parse --short HEAD 2>/dev/null || echo '?') + working tree"
echo "Text: $(wc -c <"$work/text.txt") bytes; tokenizer: byte-level BPE, $("$python" -c "
from tokenizers import Tokenizer; print(Tokenizer.from_file('$work/tokenizer.json').get_vocab_size())") tokens"
"$python" bench/tokenizers/hf_encode.py "$work" "$repeats" >"$work/hf.txt"
"$build/accel-run" bench/tokenizers/encode.lua --threads 1 -- "$work" "$repeats" >"$work/accel.txt"
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
bytes=$(wc -c <"$work/text.txt")
echo "| encoding | library | seconds | MB/s | ids |"
echo "|---|---|---|---|---|"
while read -r name seconds ids digest; do
  echo "| ${name} | accel | $seconds | $(awk "BEGIN { printf \"%.2f\", $bytes / 1e6 / $seconds }") | $ids |"
done <"$work/accel.txt"
while read -r name seconds ids digest; do
  echo "| ${name} | tokenizers | $seconds | $(awk "BEGIN { printf \"%.2f\", $bytes / 1e6 / $seconds }") | $ids |"
done <"$work/hf.txt"
# The whole text and the lines must give the reference's ids.
read -r _ _ accel_ids accel_digest < <(grep '^encode ' "$work/accel.txt")
read -r _ _ hf_ids hf_digest < <(grep '^encode ' "$work/hf.txt")
read -r _ _ accel_line_ids accel_line_digest < <(grep '^encode_lines ' "$work/accel.txt")
read -r _ _ hf_line_ids hf_line_digest < <(grep '^encode_batch ' "$work/hf.txt")
if [ "$accel_ids $accel_digest" != "$hf_ids $hf_digest" ] ||
   [ "$accel_line_ids $accel_line_digest" != "$hf_line_ids $hf_line_digest" ]; then
  echo "run.sh: accel's ids differ from tokenizers' ($accel_ids/$accel_digest vs $hf_ids/$hf_digest; lines" \
       "$accel_line_ids/$accel_line_digest vs $hf_line_ids/$hf_line_digest)" >&2
  exit 1
fi
echo
echo "Both give the same ids ($accel_ids for the whole text, $accel_line_ids line by line)."
exec 1>&3
cat "$work/results.md"
python3 bench/results.py publish bench/tokenizers "Tokenizers: encoding throughput against Hugging Face tokenizers" \
  "$command" <"$work/results.md"
