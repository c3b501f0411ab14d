# The character-level language model recipe trains below 1.5 nats per
# character on 2 ranks within its default run, then writes a sample.
source "$(dirname "$0")/lib.sh"

# The recipe runs for minutes, longer than run_accel's limit.
start=$SECONDS
timeout 290 "$accel_run" "$source_root/recipes/charlm.lua" --nproc 2 >"$work/out" 2>"$work/err"
status=$?
elapsed=$((SECONDS - start))
out=$(cat "$work/out")
err=$(cat "$work/err")

final_loss_below() {  # final_loss_below LIMIT
  local value
  value=$(grep -o "final loss [0-9.]*" "$work/out" | tail -n 1 | awk '{print $NF}')
  [ -n "$value" ] && awk -v v="$value" -v m="$1" 'BEGIN { exit !(v < m) }'
}

expect "charlm on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "charlm's final training loss is below 1.5 nats per character" final_loss_below 1.5
expect "charlm prints a sample" contains "$out" "sample:"
echo "charlm took ${elapsed}s"

finish
