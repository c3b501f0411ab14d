# accel-run --watch: a save reruns the recipe on the same warm workers, and
# the rerun's weights equal a cold run's bit for bit; a save of a file the
# recipe requires reruns it too; a failing rerun is reported and the workers
# stay warm for the next save; a crashed worker is replaced; a save during a
# run replaces the workers; a Lua file the recipe itself writes into its
# folder reruns it once, then is said to be its output and reruns no more;
# the folder moved away and back, or deleted and made again, is said and
# watched again; Ctrl-C ends everything and leaves no process and no shared
# memory behind.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
proj="$work/proj"
mkdir -p "$proj"
cd "$proj" || exit 1

# An editor's save: a new file renamed over the old one.
write_recipe() {  # write_recipe LR [EXTRA LUA LINE]
  { sed "s/lr = LR/lr = $1/" "$source_root/tests/launch/watch_recipe.lua"; echo "${2:-}"; } >"$proj/train.tmp"
  mv "$proj/train.tmp" "$proj/train.lua"
}
echo "return { epochs = 2 }" >"$proj/helpers.lua"

write_recipe 0.05
run_accel train.lua --nproc 2 -- "$work/cold"
expect "the cold run trains and saves its weights" test "$status" -eq 0 -a -s "$work/cold/model.safetensors"

# wait_runs N: waits (20 s at most) until the launcher has ended N runs.
wait_runs() {
  for _ in $(seq 200); do
    [ "$(grep -c -E '^accel-run: (run [0-9]+ finished|rank [0-9]+ failed in run|rank [0-9]+ was killed)' "$work/err")" -ge "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
snapshot() { out=$(cat "$work/out"); err=$(cat "$work/err"); }
same_weights() { cmp -s "$work/warm/model.safetensors" "$work/cold/model.safetensors"; }
pids() { cat "$work/warm/pid.0" "$work/warm/pid.1"; }

write_recipe 0.1
set -m  # job control: the launcher must not start with SIGINT ignored
"$accel_run" train.lua --watch --nproc 2 -- "$work/warm" >"$work/out" 2>"$work/err" &
launcher=$!
set +m
wait_runs 1; snapshot
expect "the first run finishes under --watch" contains "$err" "accel-run: run 1 finished"
first_pids=$(pids)

write_recipe 0.05
wait_runs 2; snapshot
expect "a save reruns the recipe" contains "$err" "accel-run: run 2: train.lua changed"
expect "the rerun finishes" contains "$err" "accel-run: run 2 finished"
expect "the rerun's weights equal the cold run's bit for bit" same_weights
expect "the rerun ran on the same warm workers" test "$(pids)" = "$first_pids"

rm -rf "$work/warm"
echo "return { epochs = 2 }" >"$proj/helpers.lua"
wait_runs 3; snapshot
expect "a save of a file the recipe requires reruns it" contains "$err" "accel-run: run 3: helpers.lua changed"
expect "that rerun's weights equal the cold run's too" same_weights

write_recipe 0.05 'error("deliberate failure \27[2J" .. string.rep("x", 900))'
wait_runs 4; snapshot
expect "a failing rerun is reported with its error" contains "$err" "failed in run 4
  train.lua:37: deliberate failure \x1b[2Jxxx"
expect "its terminal escape shown, not sent" test "$(grep -c $'\e' "$work/err")" -eq 0
expect "its long line cut" contains "$err" "x... (537 more bytes)"
expect "the other rank's identical error is named once" contains "$err" "failed too, with the same error"
expect "the workers stay warm after it" contains "$err" "the workers stay warm"

rm -rf "$work/warm"
write_recipe 0.05
wait_runs 5; snapshot
expect "the next save runs again" contains "$err" "accel-run: run 5 finished"
expect "on the same warm workers" test "$(pids)" = "$first_pids"
expect "with the cold run's weights" same_weights

write_recipe 0.05 'if acc.process_index == 1 then os.execute("kill -KILL " .. pid) end acc:wait_for_everyone()'
wait_runs 6; snapshot
expect "a crashed worker is reported" contains "$err" "accel-run: rank 1 was killed by signal 9"
expect "and replaced" contains "$err" "accel-run: starting new workers"

rm -rf "$work/warm"
write_recipe 0.05
wait_runs 7; snapshot
expect "the new workers run the next save" contains "$err" "accel-run: run 7 finished"
expect "to the cold run's weights" same_weights
expect "the new workers are new processes" test "$(pids)" != "$first_pids"
expect "which start as a first start (ACCEL_RESTART_COUNT=0), as a cold run does" \
  test "$(cat "$work/warm/restart_count.0" "$work/warm/restart_count.1")" = "00"

# What a run leaves running in the background ends with the run, as in a
# cold run: two runs that each start a sleep leave none behind.
rm -rf "$work/warm"
write_recipe 0.05 'os.execute("sleep 3171 &")'
wait_runs 8
rm -rf "$work/warm"
write_recipe 0.05 'os.execute("sleep 3171 &")'
wait_runs 9; snapshot
expect "two runs that started background processes finished" contains "$err" "accel-run: run 9 finished"
sleep 0.2
expect "and left none of them running" test -z "$(pgrep -f 'sleep 3171')"

# A save while a run goes on abandons it: new workers run the saved recipe.
rm -rf "$work/warm"
write_recipe 0.05 'os.execute("sleep 30")'
for _ in $(seq 200); do [ -s "$work/warm/pid.1" ] && break; sleep 0.05; done
write_recipe 0.05
wait_runs 10; snapshot
expect "a save during a run replaces the workers" contains "$err" "accel-run: replacing the workers: train.lua changed during run 10"
expect "and the new ones run the saved recipe" contains "$err" "accel-run: run 11 finished"
expect "to the cold run's weights" same_weights

# A recipe that writes a Lua file into its own folder: the file changes
# during two runs in a row, is then taken for the recipe's output and said
# so once, and reruns no more.
rm -rf "$work/warm"
write_recipe 0.05 'if acc.process_index == 0 then local f = io.open("generated.lua", "w") f:write("return 1") f:close() end'
wait_runs 13; snapshot
expect "a recipe writing a Lua file in its folder runs again once for it" contains "$err" "accel-run: run 13: generated.lua changed"
expect "then says it seems to write it" contains "$err" "generated.lua changed during run 12 and again during run 13: the recipe seems to write it"
sleep 1.5; snapshot
expect "and reruns no more" test "$(grep -c "accel-run: run 14" "$work/err")" -eq 0

# The folder moved away and back: said, watched again, and its return
# reruns the recipe; deleted and made again: new workers run it there.
mv "$proj" "$work/proj.away"
for _ in $(seq 100); do grep -q "was deleted or moved away" "$work/err" && break; sleep 0.1; done
snapshot
expect "a folder moved away is said" contains "$err" "accel-run: the recipe's folder . was deleted or moved away; watching for a folder there again"
mv "$work/proj.away" "$proj"
rm -rf "$work/warm"
wait_runs 14; snapshot
expect "its return is noticed" contains "$err" "accel-run: . is there again; watching it"
expect "and reruns the recipe" contains "$err" "accel-run: run 14 finished"
expect "to the cold run's weights" same_weights
cp -r "$proj" "$work/proj.copy"
rm -rf "$proj" "$work/warm"
for _ in $(seq 100); do [ "$(grep -c "was deleted or moved away" "$work/err")" -ge 2 ] && break; sleep 0.1; done
mv "$work/proj.copy" "$proj"
wait_runs 15; snapshot
expect "a folder deleted and made again is noticed" contains "$err" "accel-run: . was made again; watching it"
expect "new workers run the recipe in it" contains "$err" "accel-run: run 15 finished"
expect "to the cold run's weights" same_weights
rm -rf "$work/warm"
write_recipe 0.05
wait_runs 16; snapshot
expect "and its saves rerun it" contains "$err" "accel-run: run 16 finished"

kill -INT "$launcher"
for _ in $(seq 100); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
wait "$launcher"
status=$?
snapshot
expect "Ctrl-C ends the watch with 128 + SIGINT" test "$status" -eq 130
expect "and says so" contains "$err" "interrupted by SIGINT"
sleep 0.2
expect "no process outlives it" no_survivors
expect "no shared memory outlives it" test -z "$(ls /dev/shm | grep "^accel-$launcher-")"
finish
