# accel.progress: inside a real terminal (tmux) the main process redraws
# one live bar in place (count/total, percent, rate, elapsed<remaining,
# postfix); with output to a file or --log-dir it prints plain lines with
# no control characters; other ranks print nothing.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/progress_recipe.lua"

# ---- a terminal: tmux runs accel-run in a 120-column pane
session="accel-progress-$$"
tmux kill-session -t "$session" 2>/dev/null
tmux new-session -d -s "$session" -x 120 -y 20 \
  "'$accel_run' '$recipe' --nproc 2 -- 25 0.2 1; echo \"exit status \$?\"; sleep 60"
screens=()
for _ in $(seq 1 100); do
  sleep 0.2
  screen=$(tmux capture-pane -p -t "$session")
  screens+=("$screen")
  contains "$screen" "exit status" && break
done
tmux kill-session -t "$session" 2>/dev/null
out=$screen; err=""
expect "the recipe ends in the terminal" contains "$screen" "exit status 0"
expect "the final bar: 100%, the full bar and 25/25" \
  grep -qE '^train: 100%\|█{20}\| 25/25 \[[0-9]{2}:[0-9]{2}<00:00, [0-9.]+it/s, loss=0.04, phase=warm\]$' <<<"$screen"
expect "the loader's bar: 3/3" grep -qE '^eval: 100%\|█{20}\| 3/3 \[' <<<"$screen"
expect "redrawn in place: one line per bar" [ "$(grep -c '^train:' <<<"$screen")" -eq 1 ]
partial() {
  for s in "${screens[@]}"; do
    grep -qE '^train: +[0-9]+%\|█*[ ]+\| ([1-9]|1[0-9]|2[0-4])/25 \[[0-9:]+<[0-9:]+, [0-9.]+it/s' <<<"$s" && return 0
  done
  return 1
}
expect "a partial bar was on screen during the run, with its remaining time" partial
no_rank_1() { ! grep -q '\[rank 1\]' "$@"; }
expect "rank 1 drew nothing" no_rank_1 <<<"$screen"

# ---- a file: plain lines every interval (1 s), and the last
run_accel "$recipe" --nproc 2 -- 25 0.2 1
expect "the recipe runs" [ "$status" -eq 0 ]
lines=$(grep -c '^train: ' "$work/out")
between() { [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
expect "plain lines every second or so ($lines)" between "$lines" 3 9
expect "the first at 0/25" grep -qE '^train:   0% 0/25 \[00:00<\?, \?it/s\]$' "$work/out"
expect "the last at 25/25 with the postfix" \
  grep -qE '^train: 100% 25/25 \[[0-9:]+<00:00, [0-9.]+it/s, loss=0.04, phase=warm\]$' "$work/out"
no_control() { ! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$1"; }
expect "no control characters in the file" no_control "$work/out"
expect "nothing from rank 1" no_rank_1 "$work/out"

# ---- --log-dir: rank 0 writes to a pipe, so plain lines there too
run_accel "$recipe" --nproc 2 --log-dir "$work/logs" -- 5 0.1 1
expect "the recipe runs with --log-dir" [ "$status" -eq 0 ]
expect "rank 0's log has the plain last line" grep -qE '^train: 100% 5/5 \[' "$work/logs/rank-0.log"
expect "no control characters in rank 0's log" no_control "$work/logs/rank-0.log"
no_bar() { ! grep -q 'train' "$1"; }
expect "rank 1's log has no bar" no_bar "$work/logs/rank-1.log"

finish
