# An error raised on one rank inside a collective helper ends the run at
# once, even when the recipe catches it with pcall: the other ranks cannot
# go on without that rank, and must not wait out the collective timeout.
# So does a rank whose recipe returns while the others wait in a collective
# it never entered; its wait for the others must not pair with theirs.
source "$(dirname "$0")/lib.sh"
lacks() { [[ "$1" != *"$2"* ]]; }

cat >"$work/caught_reduce.lua" <<'LUA'
local acc = accel.Accelerator{}
local value = { accel.ones(2), accel.ones(3) }
if acc.process_index == 1 then value[2] = "not a tensor" end
local ok = pcall(function() return acc:reduce(value) end)
acc:wait_for_everyone()
print("carried on after the error: " .. tostring(ok))
acc:reduce(accel.ones(5))
LUA
run_accel --nproc 3 --threads 1 --timeout 20 "$work/caught_reduce.lua"
expect "caught reduce error: the run fails" [ "$status" -eq 1 ]
expect "caught reduce error: well before the timeout" [ "$elapsed" -lt 15 ]
expect "caught reduce error: the error is shown" contains "$err" "reduce: expected a tensor"
expect "caught reduce error: the report names the rank" contains "$err" "rank 1 failed"
expect "caught reduce error: no rank carried on" lacks "$out$err" "carried on"
expect "caught reduce error: no process left" no_survivors

cat >"$work/caught_main_first.lua" <<'LUA'
local acc = accel.Accelerator{}
pcall(function()
  acc:main_process_first(function()
    if acc.is_main_process then error("the download failed") end
  end)
end)
acc:gather(accel.ones(2))
print("carried on after the error")
LUA
run_accel --nproc 2 --threads 1 --timeout 20 "$work/caught_main_first.lua"
expect "caught main_process_first error: the run fails" [ "$status" -eq 1 ]
expect "caught main_process_first error: well before the timeout" [ "$elapsed" -lt 15 ]
expect "caught main_process_first error: the error is shown" contains "$err" "the download failed"
expect "caught main_process_first error: no process left" no_survivors

cat >"$work/returns_early.lua" <<'LUA'
local acc = accel.Accelerator{}
acc:reduce(accel.ones(4))
if acc.process_index == 1 then return end
acc:reduce(accel.ones(4))
print("carried on without rank 1")
LUA
for memory in 1 0; do  # all-reduces over shared memory, then over Gloo
  ACCEL_SHARED_MEMORY=$memory run_accel --nproc 2 --threads 1 --timeout 30 "$work/returns_early.lua"
  expect "returns early ($memory): the run fails" [ "$status" -eq 1 ]
  expect "returns early ($memory): within seconds" [ "$elapsed" -lt 10 ]
  expect "returns early ($memory): the report names both ranks and the collective" \
    contains "$err" "accel-run: stopping: rank 1 finished its recipe while rank 0 waits in all_reduce #3 of float32[4] (sum) at $work/returns_early.lua:4, which rank 1 never entered"
  expect "returns early ($memory): nobody carried on" lacks "$out$err" "carried on"
  expect "returns early ($memory): no process left" no_survivors
done

finish
