# The example recipes train to their promised accuracy on 2 ranks.
source "$(dirname "$0")/lib.sh"

accuracy_at_least() {  # accuracy_at_least PATTERN MINIMUM: the number after PATTERN in stdout
  local value
  value=$(grep -o "$1 [0-9.]*" "$work/out" | tail -n 1 | awk '{print $NF}')
  [ -n "$value" ] && awk -v v="$value" -v m="$2" 'BEGIN { exit !(v >= m) }'
}

run_accel "$source_root/recipes/quickstart.lua" --nproc 2
expect "quickstart on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "quickstart on 2 ranks reaches 95% accuracy" accuracy_at_least "accuracy" 0.95

run_accel "$source_root/recipes/digits.lua" --nproc 2 -- \
  /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz "$work/runs"
expect "digits on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "digits on 2 ranks reaches 95% test accuracy" accuracy_at_least "test accuracy" 0.95
expect "digits shows its epochs' progress" grep -q "^epochs: 100% 20/20 .*loss=" "$work/out"
expect "digits logs its loss and accuracy to metrics.jsonl" grep -q '"test_accuracy"' "$work/runs/digits/metrics.jsonl"

run_accel "$source_root/recipes/cnn.lua" --nproc 2
expect "cnn on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "cnn on 2 ranks reaches 95% test accuracy" accuracy_at_least "test accuracy" 0.95

finish
