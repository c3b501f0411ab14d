# What the launch said reaches Lua once, as accel.core.launch
# (bindings/launch_settings.h): from the command line, from a config file,
# under mpirun started by hand, and nil where the launch said nothing; and
# no file of the Lua library reads an accel variable but the user's
# ACCEL_LOG_LEVEL.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
unset ACCEL_CONFIG_FILE

cat >"$work/show.lua" <<'LUA'
local launch = require("accel.core").launch
local function text(v)
  if type(v) ~= "table" then return tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(v[k]) end
  return "{" .. table.concat(parts, " ") .. "}"
end
for _, key in ipairs({ "threads", "backend", "debug", "max_restarts", "restart_count", "mixed_precision",
                       "gradient_accumulation_steps", "zero_stage", "zero3_init_flag", "fsdp" }) do
  print(key .. " " .. text(launch[key]))
end
print("precision in force " .. accel.Accelerator{ cpu = true }.mixed_precision)
LUA

run_accel "$work/show.lua" --nproc 2 --threads 1
expect "nothing said: runs" [ "$status" -eq 0 ]
expect "nothing said: the defaults are there" contains "$out" $'threads 1\nbackend gloo\ndebug false\nmax_restarts 0\nrestart_count 0'
expect "nothing said: the Accelerator's options are nil" \
  contains "$out" $'mixed_precision nil\ngradient_accumulation_steps nil\nzero_stage nil\nzero3_init_flag nil\nfsdp nil'
expect "nothing said: the recipe's default stands" contains "$out" "precision in force no"

run_accel "$work/show.lua" --nproc 2 --threads 1 --mixed-precision bf16 --gradient-accumulation-steps 3 \
  --zero-stage 3 --zero3-init-flag true --debug --max-restarts 2
expect "the command line: runs" [ "$status" -eq 0 ]
expect "the command line: every setting" \
  contains "$out" $'debug true\nmax_restarts 2\nrestart_count 0\nmixed_precision bf16\ngradient_accumulation_steps 3\nzero_stage 3\nzero3_init_flag true\nfsdp nil'
expect "the command line: the Accelerator's default" contains "$out" "precision in force bf16"

run_accel "$work/show.lua" --nproc 2 --threads 1 --use-fsdp --fsdp-min-num-params 1000 --fsdp-offload-params yes \
  --fsdp-transformer-layer-cls-to-wrap "Block, Attention"
expect "FSDP: runs" [ "$status" -eq 0 ]
expect "FSDP: its table, typed" \
  contains "$out" "fsdp {cpu_offload=true min_num_params=1000 transformer_layer_cls=Block,Attention}"

printf 'mixed_precision: fp16\nnum_processes: 2\n' >"$work/run.yaml"
run_accel "$work/show.lua" --config "$work/run.yaml" --threads 1
expect "a config file: runs" [ "$status" -eq 0 ]
expect "a config file: its key" contains "$out" "mixed_precision fp16"

if command -v mpirun >/dev/null; then
  run_accel_mpi() {
    timeout 60 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun -np 2 --oversubscribe "$accel_run" "$work/show.lua" --mixed-precision bf16 --threads 1 \
      >"$work/out" 2>"$work/err"
    status=$?
    out=$(cat "$work/out")
    err=$(cat "$work/err")
  }
  run_accel_mpi
  expect "mpirun by hand: runs" [ "$status" -eq 0 ]
  expect "mpirun by hand: the worker read its own command line" [ "$(grep -c '^mixed_precision bf16$' "$work/out")" -eq 2 ]
  expect "mpirun by hand: the backend is MPI" [ "$(grep -c '^backend mpi$' "$work/out")" -eq 2 ]
else
  echo "skipped: mpirun by hand (no mpirun)"
fi

getenv=$(grep -rn 'os.getenv' "$source_root/lua/accel")
expect "the Lua library reads no accel variable but ACCEL_LOG_LEVEL" \
  [ "$(grep -c . <<<"$getenv")" -eq 1 -a "$(grep -c 'os.getenv("ACCEL_LOG_LEVEL")' <<<"$getenv")" -eq 1 ]
finish
