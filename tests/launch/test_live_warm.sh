# Steering the runs of warm workers (docs/live-runs.md): a run submitted to
# `accel-run serve` and a `--watch` run take `accel-run ctl` chunks from the
# folder they were started from, as a cold run does, and end on the weights
# of a cold run whose schedule changes at the step the reply names, bit for
# bit; the next run on the same workers starts unsteered (its own chunks,
# its own status); `stop` saves and ends a run as its return would, the
# workers going on serving (and a cold run exiting 0).
source "$(dirname "$0")/lib.sh" "$@"
source "$(dirname "$0")/live_lib.sh"
cd "$work" || exit 1
cp "$source_root/tests/launch/live_recipe.lua" recipe.lua

# wait_line FILE TEXT PID: until FILE holds TEXT, while PID lives.
wait_line() {
  for _ in $(seq 1200); do
    grep -qF "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
# The last reply: every rank answered VALUE (to '=lr').
answered_everywhere() {
  [ "$ctl_status" -eq 0 ] && [ "$(grep -cxE "\[rank [0-9]+\] $1" <<<"$reply")" -eq 2 ]
}
# The last reply (to status): every rank is at a step before 100, the new
# run's, not the last one's (400).
fresh_status() {
  [ "$(grep -cE '^\[rank [0-9]+\] step [0-9]{1,2}( |$)' <<<"$reply")" -eq 2 ]
}
stopped() {
  [ "$ctl_status" -eq 0 ] && [ "$(grep -c "; stopping at step" <<<"$reply")" -eq 2 ]
}

# ---- accel-run serve: two ranks -------------------------------------------
"$accel_run" serve --nproc 2 --threads 1 >serve.out 2>serve.err &
serve=$!
wait_line serve.err "serving on" $serve || fail "the serve did not start ($(cat serve.err))"

"$accel_run" submit recipe.lua -- served 400 sleep=0.01 ready=ready-served >served.out 2>served.err &
submit=$!
if wait_for ready-served $submit; then
  listed=$("$accel_run" attach --list)
  expect "the served run is listed as a run from the submitter's folder ($listed)" \
    bash -c '[ "$(awk -v cwd="$1" '"'"'$4 == cwd && $5 ~ /recipe.lua$/'"'"' <<<"$2" | wc -l)" -eq 1 ]' _ "$work" "$listed"
  ctl 'lr = 0.05'
  expect "serve: a chunk reaches the served run, found from its folder ($reply)" [ "$ctl_status" -eq 0 ]
  served_step=$(step_of "$reply")
  wait $submit
  expect "serve: the steered run ends well ($(tail -3 served.err))" [ $? -eq 0 ]
  run_accel recipe.lua --nproc 2 --threads 1 -- reference-served 400 "changes=$served_step:0.05"
  expect "serve: it ends on the weights of a cold run changing lr at step $served_step" \
    cmp served/model.safetensors reference-served/model.safetensors
else
  fail "serve: the run to steer did not start ($(cat served.err))"
fi

"$accel_run" submit recipe.lua -- served-again 100000 sleep=0.01 ready=ready-again >again.out 2>again.err &
submit=$!
if wait_for ready-again $submit; then
  ctl status
  expect "serve: the next run shows its own status ($reply)" fresh_status
  ctl '=lr'
  expect "serve: and starts from its own lr, unsteered ($reply)" answered_everywhere 0.1
  ctl "stop $work/stopped-served"
  expect "serve: stop saves on every rank and ends the run ($reply)" stopped
  wait $submit
  expect "serve: the stopped run's exit status is 0 ($(tail -3 again.err))" [ $? -eq 0 ]
  expect "serve: its checkpoint is there" [ -f stopped-served/accelerator_state.lua ]
  run_accel submit recipe.lua -- after-stop 20
  expect "serve: the workers serve the next run after a stop ($err)" \
    bash -c '[ "$1" -eq 0 ] && [[ $2 == *"finished at step 20"* ]]' _ "$status" "$out$err"
else
  fail "serve: the second run did not start ($(cat again.err))"
fi
kill -TERM $serve
wait $serve

# ---- --watch: a rerun is a new run to steer --------------------------------
"$accel_run" recipe.lua --watch --nproc 2 --threads 1 -- watched 400 sleep=0.01 ready=ready-watched \
  >watch.out 2>watch.err &
watch=$!
if wait_for ready-watched $watch; then
  ctl 'lr = 0.05'
  expect "watch: a chunk reaches the run ($reply)" [ "$ctl_status" -eq 0 ]
  watched_step=$(step_of "$reply")
  wait_line watch.err "run 1 finished" $watch || fail "watch: run 1 did not finish ($(cat watch.err))"
  run_accel recipe.lua --nproc 2 --threads 1 -- reference-watched 400 "changes=$watched_step:0.05"
  expect "watch: it ends on the weights of a cold run changing lr at step $watched_step" \
    cmp watched/model.safetensors reference-watched/model.safetensors
  rm -f ready-watched
  echo "-- saved again" >>recipe.lua
  if wait_for ready-watched $watch; then
    ctl status
    expect "watch: the rerun shows its own status ($reply)" fresh_status
    ctl '=lr'
    expect "watch: and starts from its own lr, unsteered ($reply)" answered_everywhere 0.1
    ctl "stop $work/stopped-watched"
    expect "watch: stop ends the rerun ($reply)" stopped
    expect "watch: which finishes, the workers staying warm ($(tail -3 watch.err))" \
      wait_line watch.err "run 2 finished" $watch
  else
    fail "watch: the rerun did not start ($(cat watch.err))"
  fi
else
  fail "watch: the run to steer did not start ($(cat watch.err))"
fi
kill -TERM $watch
wait $watch

# ---- a cold run's stop ------------------------------------------------------
"$accel_run" recipe.lua --nproc 2 --threads 1 -- cold 100000 sleep=0.01 ready=ready-cold >cold.out 2>cold.err &
cold=$!
if wait_for ready-cold $cold; then
  ctl "stop $work/stopped-cold"
  expect "cold: stop saves on every rank ($reply)" stopped
  wait $cold
  expect "cold: and the run exits 0 ($(tail -3 cold.err))" [ $? -eq 0 ]
  expect "cold: its checkpoint is there" [ -f stopped-cold/accelerator_state.lua ]
else
  fail "cold: the run to stop did not start ($(cat cold.err))"
fi
expect "no process of the runs is left" no_survivors
finish
