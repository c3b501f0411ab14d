-- Checkpoint throughput for a 100M-parameter model against the disk's
-- sequential write (and read) speed, measured by dd in the same run:
--   build/accel-run bench/checkpoint_io.lua [-- FOLDER [REPEATS]]
-- FOLDER (default /tmp/accel_checkpoint_io) must be on the disk to measure.
-- Times acc:save_state (model + AdamW state: every file written, checksummed
-- and fsynced, the folder renamed into place), acc:load_state (every file
-- read and checksummed, then copied into the model and optimizer) and its
-- reading half alone, and acc:save_model as safetensors and as
-- pytorch_model.bin. Each figure is the median of REPEATS (default 3).
-- load_state reads what the save just wrote, so it usually comes from the
-- page cache; the bench says whether it could drop that cache first.
local nn, optim = accel.nn, accel.optim
local ck = require("accel.core").formats

local folder = arg[1] or "/tmp/accel_checkpoint_io"
local repeats = tonumber(arg[2] or "3")
local acc = accel.Accelerator{}
assert(acc.num_processes == 1, "run on one process: the figures are one writer's")

local function median(values)
  table.sort(values)
  return values[math.ceil(#values / 2)]
end

-- Median seconds of fn(), each run after before() (untimed) when given.
local function timed(fn, before)
  local times = {}
  for _ = 1, repeats do
    if before then before() end
    local start = accel.time()
    fn()
    times[#times + 1] = accel.time() - start
  end
  return median(times)
end

local function folder_bytes(path)
  local total = 0
  for _, name in ipairs(ck.list_folder(path)) do total = total + ck.digest(path .. "/" .. name).size end
  return total
end

-- Drops the page cache when allowed (root on a machine, not in most containers).
local function drop_caches()
  os.execute("sync")
  local f = io.open("/proc/sys/vm/drop_caches", "w")
  if not f then return false end
  local ok = f:write("3\n")
  f:close()
  return ok ~= nil
end

ck.make_empty_folder(folder)

-- dd's bytes per second and its report, for one command.
local function dd(command)
  local pipe = io.popen(command .. " 2>&1")
  local text = pipe:read("*a")
  pipe:close()
  local bytes, seconds = text:match("(%d+) bytes.-copied, ([%d.,]+) s")
  assert(bytes, "could not read dd's output: " .. text)
  return tonumber(bytes) / tonumber((seconds:gsub(",", "."))), bytes .. " bytes in " .. seconds .. " s"
end

-- 1 GiB of zeros written with fdatasync before dd reports, then read back
-- (from the disk when the page cache can be dropped).
local dd_file = folder .. "/dd.bin"
local dd_rate, dd_write_text = dd(string.format("dd if=/dev/zero of=%s bs=1M count=1024 conv=fdatasync", dd_file))
drop_caches()
local dd_read_rate, dd_read_text = dd(string.format("dd if=%s of=/dev/null bs=1M", dd_file))
os.remove(dd_file)

-- 10 x Linear(3162, 3162): 99.99M parameters.
accel.set_seed(0)
local layers = {}
for _ = 1, 10 do layers[#layers + 1] = nn.Linear(3162, 3162) end
local model = nn.Sequential(unpack(layers))
local opt = optim.AdamW(model:parameters(), { lr = 1e-4 })
model, opt = acc:prepare(model, opt)
acc:backward(model(accel.randn(2, 3162)):pow(2):mean())
opt:step(); opt:zero_grad()  -- AdamW's state now exists: two more tensors per parameter

local state_dir, weights_dir = folder .. "/state", folder .. "/weights"
local save = timed(function() acc:save_state(state_dir) end)
local state_bytes = folder_bytes(state_dir)
local dropped = drop_caches()
local load = timed(function() acc:load_state(state_dir) end, drop_caches)
-- The reading half of load_state alone: every file read and checksummed
-- against the manifest, nothing copied into the model or optimizer.
local read_only = timed(function()
  for _, f in ipairs(ck.read_manifest(state_dir).files) do
    local path = state_dir .. "/" .. f.name
    if f.format == "safetensors" then ck.read_safetensors(path, f) else ck.read_text(path, f) end
  end
end, drop_caches)
local save_st = timed(function() acc:save_model(model, weights_dir .. "_st") end)
local weights_bytes = folder_bytes(weights_dir .. "_st")
local save_bin = timed(function() acc:save_model(model, weights_dir .. "_bin", { safe_serialization = false }) end)

local MB = 1e6
-- `against` is dd's write or read rate.
local function row(what, bytes, seconds, against, against_name)
  print(string.format("| %s | %.0f | %.2f | %.0f | %.2f x dd %s |", what, bytes / MB, seconds, bytes / MB / seconds,
                      bytes / seconds / against, against_name))
end
print(string.format("parameters: %.2fM; dd write %.0f MB/s (%s), dd read %.0f MB/s (%s); page cache dropped "
                    .. "before reads: %s; median of %d", model:num_parameters() / 1e6, dd_rate / MB, dd_write_text,
                    dd_read_rate / MB, dd_read_text, dropped and "yes" or "no", repeats))
print("| operation | MB | seconds | MB/s | against dd |")
print("|---|---|---|---|---|")
row("save_state (model + AdamW state)", state_bytes, save, dd_rate, "write")
row("load_state", state_bytes, load, dd_read_rate, "read")
row("of which reading and checksumming", state_bytes, read_only, dd_read_rate, "read")
row("save_model, safetensors", weights_bytes, save_st, dd_rate, "write")
row("save_model, pytorch_model.bin", weights_bytes, save_bin, dd_rate, "write")
ck.remove_folder(folder)
