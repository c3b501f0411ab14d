# A failing rank ends the whole run quickly, is named as the culprit with
# its Lua error and line, and leaves no process behind.
source "$(dirname "$0")/lib.sh"

cat >"$work/error_on_rank1.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 1 then
  error("rank one cannot go on")
end
acc:wait_for_everyone()  -- rank 0 waits here for a rank that never comes
LUA
run_accel --nproc 2 "$work/error_on_rank1.lua"
expect "error on rank 1: launcher exits 1" [ "$status" -eq 1 ]
expect "error on rank 1: within 30 s" [ "$elapsed" -lt 30 ]
expect "error on rank 1: rank 1 is named as failed" contains "$err" "rank 1 failed with exit code 1"
expect "error on rank 1: the Lua error and its line are shown" contains "$err" "error_on_rank1.lua:3: rank one cannot go on"
expect "error on rank 1: a traceback is shown" contains "$err" "stack traceback"
expect "error on rank 1: rank 0 is reported as stopped, not as a cause" contains "$err" "rank 0 was stopped by the launcher after rank 1 failed"
expect "error on rank 1: no process left" no_survivors

cat >"$work/sigkill_rank1.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 1 then
  local stat = io.open("/proc/self/stat"):read("*l")
  os.execute("kill -9 " .. stat:match("^(%d+)"))
end
acc:wait_for_everyone()
LUA
run_accel --nproc 2 "$work/sigkill_rank1.lua"
expect "SIGKILL on rank 1: launcher exits 128+9" [ "$status" -eq 137 ]
expect "SIGKILL on rank 1: within 30 s" [ "$elapsed" -lt 30 ]
expect "SIGKILL on rank 1: the signal is named" contains "$err" "rank 1 was killed by signal 9 (SIGKILL"
expect "SIGKILL on rank 1: rank 0 reported as stopped" contains "$err" "rank 0 was stopped by the launcher after rank 1 failed"
expect "SIGKILL on rank 1: no process left" no_survivors

printf 'local x = = 1\n' >"$work/syntax_error.lua"
run_accel --nproc 2 "$work/syntax_error.lua"
expect "syntax error: launcher exits 1" [ "$status" -eq 1 ]
expect "syntax error: file and line are named" contains "$err" "syntax_error.lua:1:"
expect "syntax error: no process left" no_survivors

cat >"$work/exit_code.lua" <<'LUA'
if accel.Accelerator{}.process_index == 1 then os.exit(7) end
LUA
run_accel --nproc 2 "$work/exit_code.lua"
expect "os.exit(7) on rank 1: launcher exits 7" [ "$status" -eq 7 ]
expect "os.exit(7) on rank 1: rank named" contains "$err" "rank 1 failed with exit code 7"

cat >"$work/output.lua" <<'LUA'
local acc = accel.Accelerator{}
print("hello from " .. acc.process_index .. " args " .. table.concat(arg, ","))
acc:print("only once")
LUA
run_accel "$work/output.lua" --nproc 2 -- a b
expect "output: rank 0 as is" grep -qx "hello from 0 args a,b" "$work/out"
expect "output: rank 1 prefixed" grep -qx "\[rank 1\] hello from 1 args a,b" "$work/out"
expect "output: acc:print on the main process only" [ "$(grep -c "only once" "$work/out")" -eq 1 ]
expect "output: success exits 0" [ "$status" -eq 0 ]

# A recipe of compiled bytecode is refused before it runs (LuaJIT does not
# verify bytecode); a recipe is Lua source.
cat >"$work/compile.lua" <<LUA
local f = assert(io.open("$work/compiled.lua", "wb"))
f:write(string.dump(function() os.execute("touch $work/bytecode_ran") end))
f:close()
LUA
timeout 60 "$accel_run" "$work/compile.lua" --threads 1 >/dev/null 2>&1
run_accel "$work/compiled.lua" --nproc 1
expect "bytecode: refused, named" contains "$err" "$work/compiled.lua is compiled Lua bytecode; accel-run runs recipes as Lua source only"
expect "bytecode: nothing of it ran" [ "$status" -ne 0 -a ! -e "$work/bytecode_ran" ]

finish
