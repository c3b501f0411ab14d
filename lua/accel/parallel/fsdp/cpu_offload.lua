-- What an FSDP plugin's cpu_offload or a DeepSpeed plugin's
-- offload_optimizer_device / offload_param_device ask for: nil (the state
-- stays on the compute device) or {pin_memory = bool}, the shards, their
-- gradients and the optimizer state kept on the host and the optimizer
-- stepped there (engine/parallel/cpu_offload.h; docs/api/sharding.md,
-- "CPU offload").
local args = require("accel.util.args")

local cpu_offload = {}

-- FSDP2's CPUOffloadPolicy: cpu_offload = true, or {pin_memory = bool}
-- (default true, as FSDP2's).
function cpu_offload.from_fsdp(where, value)
  if value == nil or value == false then return nil end
  if value == true then return { pin_memory = true } end
  if type(value) ~= "table" then
    args.error(where .. ": cpu_offload must be a boolean or {pin_memory = bool}, got a " .. type(value))
  end
  local o = args.options(where .. " cpu_offload", value, { pin_memory = true }, { pin_memory = "boolean" })
  return { pin_memory = o.pin_memory }
end

local devices = { none = true, cpu = true }

local function device(where, key, value)
  if value == nil or value == "none" then return false end
  if value == "nvme" then
    args.error(where .. ": " .. key .. " = 'nvme' is not supported (only 'cpu' or 'none')")
  end
  if not devices[value] then
    args.error(string.format("%s: %s must be 'cpu' or 'none', got '%s'", where, key, tostring(value)))
  end
  return true
end

-- DeepSpeed's ZeRO-Offload at `stage`. The optimizer steps the parameter
-- shards themselves (there is no separate float32 master copy), so at
-- stage 3 offloading either the optimizer or the parameters keeps both on
-- the host; offload_param_device needs stage 3, as in DeepSpeed.
function cpu_offload.from_deepspeed(where, stage, optimizer_device, param_device)
  local optimizer = device(where, "offload_optimizer_device", optimizer_device)
  local params = device(where, "offload_param_device", param_device)
  if params and stage ~= 3 then
    args.error(string.format("%s: offload_param_device = 'cpu' needs zero_stage 3 (parameters are sharded only "
                             .. "there), got zero_stage %s", where, tostring(stage)))
  end
  if (optimizer or params) and (stage or 0) == 0 then
    args.error(where .. ": offload_optimizer_device = 'cpu' needs zero_stage 1, 2 or 3: the offloaded state is the "
               .. "shards'")
  end
  return (optimizer or params) and { pin_memory = true } or nil
end

return cpu_offload
