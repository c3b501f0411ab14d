# accel-run repl, driven through a real terminal (tmux): chunks run on 2
# ranks, =expr prints each rank's value, state is kept between chunks, a
# chunk may span lines (and history recalls it whole), Ctrl-C drops a line
# being typed, an error is reported per rank and the session goes
# on, Ctrl-C interrupts a running chunk (and replaces the workers when a
# compiled loop never sees it), a rank that dies or calls os.exit is
# reported and replaced, Ctrl-D leaves with exit code 0 and no process left
# behind, the history file keeps the last 1000 chunks, and a FIFO named as
# the history file neither blocks start-up nor is used.
source "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || { echo "tmux is not installed: skipped"; exit 77; }
export XDG_CONFIG_HOME="$work/xdg"
session="accel-repl-$$"
socket="$work/tmux.sock"
tmux_() { tmux -S "$socket" "$@"; }
trap 'tmux_ kill-server 2>/dev/null; rm -rf "$work"' EXIT

# A long history from earlier sessions: the file keeps the last 1000 chunks.
seq -f 'old_chunk_%g = 1' 1500 >"$work/.accel_repl_history"
tmux_ new-session -d -s "$session" -x 160 -y 50 \
  "HOME='$work' '$accel_run' repl --nproc 2; echo \$? >'$work/exit'; sleep 60"
screen() { tmux_ capture-pane -p -t "$session" -S -400 -J; }
# wait_for TEXT [COUNT]: waits (15 s at most) until the screen shows TEXT COUNT times.
wait_for() {
  for _ in $(seq 150); do
    [ "$(screen | grep -c -F -- "$1")" -ge "${2:-1}" ] && return 0
    sleep 0.1
  done
  return 1
}
type_line() { tmux_ send-keys -t "$session" -l -- "$1"; tmux_ send-keys -t "$session" Enter; }
prompts=1
# run_line LINE: types it and waits for the next prompt.
run_line() {
  type_line "$1"
  prompts=$((prompts + 1))
  wait_for "accel> " "$prompts"
}
check() { out=$(screen); err=""; expect "$1" contains "$out" "$2"; }
# next_prompt: waits for the prompt after an event that printed one itself.
next_prompt() { wait_for "accel> " $((prompts + 1)); prompts=$((prompts + 1)); }
# note_pids: adds the current workers' pids to $pids (none may outlive the REPL).
pids=""
note_pids() {
  run_line 'pid = io.open("/proc/self/stat"):read("*n")'
  run_line '=pid'
  pids="$pids$(screen | sed -n 's/^\[rank [01]\] \([0-9][0-9]*\)$/\1/p' | tail -2 | tr '\n' ' ')"
}

wait_for "accel> "
check "the prompt says what it is" "Lua on 2 rank(s)"
run_line 'x = accel.tensor({1, 2, 3}) * (accel.PartialState().process_index + 1)'
run_line '=x:sum():item()'
check "=expr prints rank 0's value" "[rank 0] 6"
check "and rank 1's" "[rank 1] 12"

type_line 'function scaled(v)'
type_line '  return v * 10'
run_line 'end'
check "an open function asks for more lines" "...>   return v * 10"
tmux_ send-keys -t "$session" Up
wait_for "accel> function scaled(v)   return v * 10 end"
check "Up recalls that chunk as one line" "accel> function scaled(v)   return v * 10 end"
tmux_ send-keys -t "$session" C-c
next_prompt
run_line '=scaled(x:sum():item())'
check "the chunk defined the function on every rank" "[rank 1] 120"

run_line 'error("deliberate")'
check "an error is reported with its rank" "[rank 0] repl:1: deliberate"
check "once per distinct error" "[rank 1] the same error"
run_line 'if accel.PartialState().process_index == 1 then error("only on rank one") end'
check "an error of one rank names that rank" "[rank 1] repl:1: only on rank one"
run_line 'error("escape \27[31m and " .. string.rep("y", 800))'
check "an error's terminal escapes are shown, not sent" '[rank 0] repl:1: escape \x1b[31m and yyy'
check "and its long line is cut" 'y... (425 more bytes)'
run_line '=x:max():item()'
check "the session goes on with its state" "[rank 1] 6"

type_line 'while true do accel.zeros(1) end'
sleep 1
tmux_ send-keys -t "$session" C-c
next_prompt
check "Ctrl-C interrupts the running chunk" "[rank 0] repl:1: interrupted"
note_pids

type_line 'if accel.PartialState().process_index == 1 then os.execute("kill -KILL " .. pid) end'
wait_for "new workers: the session's state is lost"
check "a rank that dies is reported" "rank 1 was killed by signal 9"
next_prompt
run_line '=x'
check "new workers start with a fresh state (strict globals: x is unknown)" "[rank 1] the same error"
check "as rank 0 says" "[rank 0] repl:1: undefined global 'x'"
note_pids

type_line 'while true do end'
sleep 1
tmux_ send-keys -t "$session" C-c
wait_for "did not stop within"
check "a compiled loop that never sees Ctrl-C is ended by new workers" \
  "starting new workers (the session's state is lost)"
next_prompt
run_line '=1 + 1'
check "and the session goes on" "[rank 1] 2"
note_pids

# A collective only some ranks enter is noticed at once, as --watch notices it.
type_line 'if accel.PartialState().process_index == 1 then accel.PartialState():wait_for_everyone() end'
wait_for "finished its chunk while"
check "a collective only rank 1 entered is named" "rank 0 finished its chunk while rank 1 waits in barrier"
next_prompt
run_line '=2 + 2'
check "and the session goes on with new workers" "[rank 1] 4"
note_pids

# os.exit on one rank ends its worker: said with the rank, and new workers
# take over.
type_line 'if accel.PartialState().process_index == 1 then os.exit(0) end'
wait_for "rank 1's worker ended"
check "os.exit on a rank is said with the rank and why" \
  "accel-run: replacing the workers: rank 1's worker ended (os.exit ends a rank's worker)"
next_prompt
run_line '=3 + 3'
check "and the session goes on with new workers" "[rank 1] 6"
note_pids

tmux_ send-keys -t "$session" C-d
for _ in $(seq 100); do [ -s "$work/exit" ] && break; sleep 0.1; done
expect "Ctrl-D leaves with exit code 0" test "$(cat "$work/exit" 2>/dev/null)" = 0
alive=""
for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
expect "no worker outlives the REPL (checked pids: $pids)" test -z "$alive" -a -n "$pids"
history=$(cat "$work/.accel_repl_history")
expect "the history file keeps the last 1000 chunks" test "$(wc -l <"$work/.accel_repl_history")" -eq 1000
expect "the newest of them" contains "$history" "=3 + 3"
expect "and drops the oldest" test "$(grep -c -x 'old_chunk_1 = 1' "$work/.accel_repl_history")" -eq 0
out=$(screen); err=""

# A training loop run in the REPL is a live run to steer from its folder
# (docs/live-runs.md): `accel-run ctl` there changes its lr at a step, and
# it ends on the weights of a cold run changing lr at the step the reply names.
mkdir "$work/steer"
cp "$source_root/tests/launch/live_recipe.lua" "$work/steer/recipe.lua"
tmux_ new-session -d -s steer -c "$work/steer" -x 160 -y 50 \
  "HOME='$work' '$accel_run' repl --nproc 2 --threads 1; echo \$? >'$work/exit.steer'; sleep 60"
session=steer
prompts=1
wait_for "accel> "
type_line 'arg = {"steered", "400", "sleep=0.01", "ready=ready"}; dofile("recipe.lua")'
for _ in $(seq 300); do [ -e "$work/steer/ready" ] && break; sleep 0.1; done
reply=$(cd "$work/steer" && timeout 60 "$accel_run" ctl 'lr = 0.05' 2>&1)
expect "a chunk reaches the loop running in the REPL ($reply)" contains "$reply" "applied at step"
steered_step=$(sed -n 's/^applied at step \([0-9]*\)$/\1/p' <<<"$reply")
for _ in $(seq 4); do wait_for "finished at step" && break; done
check "the loop finishes with the lr the chunk set" "finished at step 400 with lr 0.05"
cd "$work/steer" || exit 1
run_accel recipe.lua --nproc 2 --threads 1 -- reference 400 "changes=$steered_step:0.05"
cd - >/dev/null || exit 1
expect "and ends on the weights of a cold run changing lr at step $steered_step ($err)" \
  cmp "$work/steer/steered/model.safetensors" "$work/steer/reference/model.safetensors"
tmux_ send-keys -t steer C-d
for _ in $(seq 100); do [ -s "$work/exit.steer" ] && break; sleep 0.1; done
expect "the REPL leaves with exit code 0" test "$(cat "$work/exit.steer" 2>/dev/null)" = 0

# A history file that is a FIFO would block start-up: it is said and not used.
mkfifo "$work/fifo"
tmux_ new-session -d -s fifo -x 160 -y 50 \
  "ACCEL_REPL_HISTORY='$work/fifo' '$accel_run' repl --nproc 1; echo \$? >'$work/exit.fifo'; sleep 60"
session=fifo
prompts=1
wait_for "accel> "
check "a FIFO for a history file is said" "accel-run: the REPL's history file $work/fifo is a FIFO: no history is read or kept"
run_line '=5 + 5'
check "and the REPL starts all the same" "10"
tmux_ send-keys -t fifo C-d
for _ in $(seq 100); do [ -s "$work/exit.fifo" ] && break; sleep 0.1; done
expect "and leaves with exit code 0" test "$(cat "$work/exit.fifo" 2>/dev/null)" = 0
expect "leaving the FIFO a FIFO" test -p "$work/fifo"
finish
