# Steering a live run (docs/live-runs.md): chunks sent with `accel-run ctl`
# land at a recorded step on every rank, and the run ends on the weights of
# an unsteered run whose schedule changes at those steps, bit for bit; a
# checkpoint saved after them replays them; a chunk that raises on one rank
# changes nothing; a chunk sent to a paused run applies on resume; status
# calls do not disturb it; attaching without the secret, or as another
# user, is refused.
source "$(dirname "$0")/lib.sh" "$@"
source "$(dirname "$0")/live_lib.sh"
recipe=$source_root/tests/launch/live_recipe.lua
cd "$work"

refused_everywhere() {
  [ "$ctl_status" -eq 1 ] && [[ $reply == *"rank(s) $((nproc - 1)) failed"* && $reply == *"ctl 2:2: boom"* ]]
}
# Every rank still holds the lr the first chunk set.
unchanged_everywhere() {
  [ "$ctl_status" -eq 0 ] && [ "$(grep -cE '^\[rank [0-9]+\] 0.05$' <<<"$reply")" -eq "$nproc" ]
}
all_paused() { [ "$(grep -c "paused at step $paused" <<<"$reply")" -eq "$nproc" ]; }
logged() {
  [ "$(grep -c '"chunk"' "logs-$tag/control.log")" -eq 3 ] &&  # with the read of =lr
    grep -qF "{\"step\": $first, \"chunk\": \"lr = 0.05\"}" "logs-$tag/control.log"
}
attached() { [[ $out == *"[rank 0] step "* && $out == *"[rank 0] 0.1"* ]]; }

steer() {  # steer NPROC EXTRA_OPTION...
  local nproc=$1; shift
  local tag=$nproc${1:+-fsdp}
  rm -f ready
  "$accel_run" "$recipe" --nproc "$nproc" --log-dir "logs-$tag" "$@" -- "steered-$tag" 400 sleep=0.01 ready=ready \
    >"steered-$tag.out" 2>"steered-$tag.err" &
  local run=$!
  if ! wait_for ready $run; then
    fail "$tag: the run to steer did not start ($(cat "steered-$tag.err"))"
    return
  fi
  ctl 'lr = 0.05'
  expect "$tag: a chunk is applied at a step ($reply)" [ "$ctl_status" -eq 0 ]
  first=$(step_of "$reply")
  ctl $'lr = 0.01\nif acc.process_index == acc.num_processes - 1 then error("boom") end'
  expect "$tag: a chunk raising on the last rank's line 2 is refused on every rank, naming both ($reply)" \
    refused_everywhere
  ctl '=lr'
  expect "$tag: and it changed nothing on any rank ($reply)" unchanged_everywhere
  # Bytecode is never run: a chunk is source text (LuaJIT runs bytecode unverified).
  ctl "$(printf '\033')LJ lr = 9"
  expect "$tag: a chunk of bytecode is refused ($reply)" \
    bash -c '[ "$1" -ne 0 ] && [[ $2 == *"wrong mode"* ]]' _ "$ctl_status" "$reply"
  ctl pause
  paused=$(sed -n 's/^\[rank 0\] paused at step \([0-9]*\)$/\1/p' <<<"$reply")
  "$accel_run" ctl 'lr = 0.02' >late.out 2>&1 &
  local late=$!
  sleep 0.5
  ctl status
  expect "$tag: status shows every rank paused ($reply)" all_paused
  for _ in $(seq 20); do ctl status; done
  ctl resume
  wait $late
  expect "$tag: the chunk sent while paused applies on resume, at step $paused ($(cat late.out))" \
    grep -qx "applied at step $paused" late.out
  ctl "save $work/saved-$tag"
  expect "$tag: save checkpoints the run now ($reply)" [ -f "saved-$tag/accelerator_state.lua" ]
  for _ in $(seq 20); do ctl status; done
  wait $run
  local run_status=$?
  expect "$tag: the steered run ends well ($(tail -3 "steered-$tag.err"))" [ "$run_status" -eq 0 ]
  expect "$tag: the log records the changes with their steps ($(cat logs-$tag/control.log))" logged
  run_accel "$recipe" --nproc "$nproc" "$@" -- "reference-$tag" 400 "changes=$first:0.05,$paused:0.02"
  expect "$tag: an unsteered run changing lr at steps $first and $paused ends on the same weights" \
    cmp "steered-$tag/model.safetensors" "reference-$tag/model.safetensors"
  run_accel "$recipe" --nproc "$nproc" "$@" -- "resumed-$tag" 400 "resume=$work/saved-$tag"
  expect "$tag: resumed from the checkpoint saved after the changes, it replays them" \
    cmp "steered-$tag/model.safetensors" "resumed-$tag/model.safetensors"
}

steer 1
steer 2
steer 2 --use-fsdp

# Who may connect.
"$accel_run" "$recipe" --nproc 1 -- quiet 100000 sleep=0.01 ready=ready2 >quiet.out 2>quiet.err &
quiet=$!
wait_for ready2 $quiet || fail "the run to attach to did not start ($(cat quiet.err))"
id=$("$accel_run" attach --list | awk -v cwd="$work" '$4 == cwd { print $1 }')
out=$(printf 'status\n=lr\n' | "$accel_run" attach "$id" 2>&1)
expect "attach by id runs each line ($out)" attached
folder=${XDG_RUNTIME_DIR:+$XDG_RUNTIME_DIR/accel-runs}
folder=${folder:-/tmp/accel-runs-$(id -u)}/$id
owner_only() {
  [ "$(stat -c %a "$folder")" = 700 ] && [ "$(stat -c %a "$folder/control.sock")" = 600 ] &&
    [ "$(stat -c %a "$folder/secret")" = 600 ]
}
expect "the run's folder ($folder), its socket and secret are the owner's only" owner_only
answer=$(/usr/bin/python3 - "$folder/control.sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"hello not-the-secret\nchunk 2\nlr")
print(s.recv(200).decode().strip())
PY
)
expect "a connection with a wrong secret is refused ($answer)" contains "$answer" "refused: wrong secret"
answer=$(/usr/bin/python3 - "$folder/control.sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"chunk 8\nlr = 0.7")
print(s.recv(200).decode().strip())
PY
)
expect "a connection sending a chunk without any secret is refused ($answer)" contains "$answer" "refused: wrong secret"
out=$(printf '=lr\n' | "$accel_run" attach "$id" 2>&1)
expect "and the chunk it sent never ran ($out)" contains "$out" "[rank 0] 0.1"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  other=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX); s.connect('$folder/control.sock'); print('connected')
except OSError as e:
    print('refused:', e.strerror)" 2>&1)
  expect "another user cannot reach the socket ($other)" contains "$other" "refused: Permission denied"
fi
kill -TERM $quiet; wait $quiet
expect "the run's folder goes with its launcher" [ ! -e "$folder" ]
# The example recipe, steered through its hook.
"$accel_run" "$source_root/recipes/steerable.lua" --nproc 2 -- 3000 "$work/example" >example.out 2>example.err &
example=$!
ctl 'lr 0.2'
hook_reply=$reply
ctl 'lr 5'
bad_reply=$reply
wait $example
example_status=$?
expect "the example recipe's hook changes lr ($hook_reply)" contains "$hook_reply" "applied at step"
expect "and refuses a value out of range on every rank ($bad_reply)" contains "$bad_reply" "lr takes a number between 0 and 1"
expect "the example ends on the lr set, with its checkpoints ($(tail -2 example.err))" \
  bash -c "[ $example_status -eq 0 ] && grep -q 'with lr 0.2' example.out && [ -f example/step_2000/accelerator_state.lua ]"
finish
