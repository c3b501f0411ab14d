# Collectives over Lua tables: under --debug, ranks passing tables with
# different keys all fail at once with a message naming the ranks and the
# keys (rather than pairing different keys, aborting inside Gloo, or
# hanging); tables with the same keys built in different orders pass.
# pad_across_processes of tensors with different numbers of dims fails on
# every rank, --debug or not, naming each rank's shape.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

cat >"$work/different_keys.lua" <<'LUA'
local acc = accel.Accelerator{}
local batch = { predictions = accel.ones(4), references = accel.zeros(4) }
if acc.process_index == 1 then batch = { predictions = accel.ones(4), labels = accel.zeros(4, 2) } end
local all = acc:gather_for_metrics(batch)
print("gathered " .. all.predictions:size(1) .. " rows")
LUA
run_accel "$work/different_keys.lua" --nproc 3 --debug --timeout 60
expect "different keys: the run fails" [ "$status" -eq 1 ]
expect "different keys: within 30 s" [ "$elapsed" -lt 30 ]
expect "different keys: the operation and the line are named" \
  contains "$err" "different_keys.lua:4: gather_for_metrics: the ranks passed tables with different keys"
expect "different keys: ranks 0 and 2 are named with their keys" \
  contains "$err" "ranks 0, 2 passed keys {predictions, references}"
expect "different keys: rank 1 is named with its keys" contains "$err" "rank 1 passed keys {labels, predictions}"
expect "different keys: the keys not on every rank are named" \
  contains "$err" "'labels' only on rank 1, 'references' only on ranks 0, 2"
expect "different keys: no abort inside Gloo" bash -c '! grep -q "SIGABRT\|gloo" <<<"$1"' _ "$err"
expect "different keys: nothing was gathered" [ -z "$out" ]
expect "different keys: no process left" no_survivors

cat >"$work/tensor_or_table.lua" <<'LUA'
local acc = accel.Accelerator{}
local value = acc.process_index == 1 and accel.ones(3) or { accel.ones(3) }
acc:broadcast(value, 0)
print("broadcast done")
LUA
run_accel "$work/tensor_or_table.lua" --nproc 3 --debug --timeout 60
expect "a tensor against a table: the run fails" [ "$status" -eq 1 ]
expect "a tensor against a table: within 30 s" [ "$elapsed" -lt 30 ]
expect "a tensor against a table: the collectives are named" \
  contains "$err" "ranks called different collectives: ranks 0, 2 called all_gather of float64[2]"
expect "a tensor against a table: rank 1's broadcast is named" contains "$err" "rank 1 called broadcast of float32[3]"
expect "a tensor against a table: nothing was broadcast" [ -z "$out" ]
expect "a tensor against a table: no process left" no_survivors

cat >"$work/same_keys.lua" <<'LUA'
local acc = accel.Accelerator{}
local r = acc.process_index
local names = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l" }
for round = 1, 5 do
  local batch = {}
  for n = 1, #names do
    local i = (n * ({ 1, 5, 7 })[r + 1] + round) % #names + 1  -- each rank inserts the keys in its own order
    batch[names[i]] = accel.full({ 1, i }, 100 * r + i)
  end
  local all = acc:gather(batch)
  for i, name in ipairs(names) do
    for q = 0, acc.num_processes - 1 do
      assert(all[name][q + 1]:mean():item() == 100 * q + i, name .. " from rank " .. q)
    end
  end
end
acc:print("all keys matched")
LUA
run_accel "$work/same_keys.lua" --nproc 3 --debug
expect "same keys in different orders pass under --debug" [ "$status" -eq 0 ]
expect "same keys: every value under its own key" contains "$out" "all keys matched"

cat >"$work/pad_dims.lua" <<'LUA'
local acc = accel.Accelerator{}
local t = acc.process_index == 1 and accel.zeros(2, 3, 4) or accel.zeros(2, 3)
local padded = acc:pad_across_processes(t, { dim = 2 })
print("padded to " .. padded:size(2))
LUA
for debug in "" "--debug"; do
  run_accel "$work/pad_dims.lua" --nproc 2 $debug --timeout 60
  expect "pad dims $debug: the run fails" [ "$status" -eq 1 ]
  expect "pad dims $debug: within 30 s" [ "$elapsed" -lt 30 ]
  expect "pad dims $debug: the ranks and shapes are named" contains "$err" \
    "pad_dims.lua:3: pad_across_processes: the ranks passed tensors with different numbers of dims: rank 0 passed [2, 3] (2 dims), rank 1 passed [2, 3, 4] (3 dims)"
  expect "pad dims $debug: nothing was padded" [ -z "$out" ]
  expect "pad dims $debug: no process left" no_survivors
done

finish
