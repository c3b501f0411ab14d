# Accelerator{log_with = "all"} on 2 ranks: TensorBoard's own reader
# (EventAccumulator) finds every scalar at its step with its value and the
# config as hparams, metrics.jsonl and config.json hold the same, only the
# main process wrote, and a recipe ending on an error still leaves its
# files complete, the session marked failed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tensorboard_venv.sh"
recipe="$source_root/tests/launch/trackers_recipe.lua"
check="$source_root/tests/launch/trackers_check.py"

run_accel "$recipe" --nproc 2 -- "$work/project" ok
expect "the recipe runs" [ "$status" -eq 0 ]
expect "it says so" contains "$out" "trackers recipe done"
expect "one run folder" [ "$(ls "$work/project")" = "ok" ]
tb_check() { "$tensorboard_python" "$check" "$work/project/$1" "$2" >"$work/check.out" 2>&1; }
expect "TensorBoard and json read every scalar, step and hparam" tb_check ok success
cat "$work/check.out"

run_accel "$recipe" --nproc 2 -- "$work/project" failed fail
expect "the failing recipe exits non-zero" [ "$status" -ne 0 ]
expect "its error is reported" contains "$err" "the recipe fails after logging"
expect "its files are complete and the session failed" tb_check failed failure
cat "$work/check.out"

cat >"$work/bad.lua" <<'LUA'
local ok, message = pcall(accel.Accelerator, { log_with = "wandb", project_dir = "x" })
assert(not ok and message:find("unknown tracker 'wandb'", 1, true), message)
ok, message = pcall(accel.Accelerator, { log_with = { "jsonl", 3 }, project_dir = "x" })
assert(not ok and message:find("unknown tracker a number", 1, true), message)
ok, message = pcall(accel.Accelerator, { log_with = "jsonl" })
assert(not ok and message:find("needs a folder", 1, true), message)
local acc = accel.Accelerator{ log_with = { "jsonl" }, project_dir = arg[1] }
acc:init_trackers("r", {})
ok, message = pcall(function() acc:log({ ["bad\255name"] = 1 }, 0) end)
assert(not ok and message:find("metric name 'bad\\xffname' is not valid UTF-8", 1, true), message)
ok, message = pcall(function() acc:log({ step = 1 }, 0) end)
assert(not ok and message:find("metric name 'step'", 1, true), message)
ok, message = pcall(function() acc:init_trackers("again") end)
assert(not ok and message:find("trackers for run 'r' are open", 1, true), message)
acc:end_training()
-- Run names are folders inside project_dir: none may leave it or hold bytes
-- that are not printable, and the message shows no raw byte.
for name, says in pairs({ ["../../x"] = "has a '..' part", [".."] = "has a '..' part", ["a/./b"] = "has a '.' part",
                          ["/tmp/x"] = "is an absolute path",
                          ["new\nline"] = "control character (byte 0x0a at 4)",
                          ["esc\27[31m"] = "control character (byte 0x1b at 4)",
                          ["bad\255"] = "the run name 'bad\\xff' is not valid UTF-8" }) do
  ok, message = pcall(function() acc:init_trackers(name, {}) end)
  assert(not ok and message:find(says, 1, true), message)
  assert(not message:find("[%z\1-\31\127-\255]"), "a raw byte in: " .. message)
end
print("bad options refused")
LUA
run_accel "$work/bad.lua" -- "$work/project"
expect "bad log_with, names and steps are errors naming them" contains "$out" "bad options refused"

finish
