# Recipes run with strict globals: a typo fails at its line with the name,
# on every rank, while top-level assignments, `arg` and `accel` still work.
source "$(dirname "$0")/lib.sh"

cat > "$work/typo.lua" <<'LUA'
local model = accel.zeros(2)
local total = 0
total = total + modle:sum():item()
LUA
run_accel "$work/typo.lua" --nproc 2
expect "a misspelt global fails the run" [ "$status" -ne 0 ]
expect "the report names the global and its line" contains "$err" "typo.lua:3: undefined global 'modle'"

cat > "$work/inside.lua" <<'LUA'
local function step()
  lossses = 1
end
step()
LUA
run_accel "$work/inside.lua"
expect "creating a global inside a function fails" [ "$status" -ne 0 ]
expect "the report names the assignment" contains "$err" "inside.lua:2: assignment to undeclared global 'lossses'"

cat > "$work/fine.lua" <<'LUA'
steps = tonumber(arg[1])
local function bump() steps = steps + 1 end
bump()
print("steps " .. steps .. " " .. accel.ones(2):sum():item())
LUA
run_accel "$work/fine.lua" -- 41
expect "top-level globals, arg and accel work" [ "$status" -eq 0 ]
expect "the recipe ran to the end" contains "$out" "steps 42 2"

finish
