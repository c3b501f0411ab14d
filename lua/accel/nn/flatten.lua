-- Flatten(start_dim = 2, end_dim = -1) merges dims (1-based, so the batch dim
-- stays), also as {start_dim, end_dim}; Unflatten(dim, sizes) splits one
-- dim into sizes.
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local function check_dim(where, name, dim)
  if type(dim) ~= "number" or dim == 0 or dim % 1 ~= 0 then
    args.error(string.format("%s: %s must be a non-zero integer (1-based, -1 the last), got %s", where, name,
                             tostring(dim)))
  end
  return dim
end

local Flatten = Module:extend("Flatten")
function Flatten:init(start_dim, end_dim)
  if type(start_dim) == "table" and end_dim == nil then
    local o = args.options("nn.Flatten", start_dim, { start_dim = 2, end_dim = -1 })
    start_dim, end_dim = o.start_dim, o.end_dim
  end
  self.start_dim = check_dim("nn.Flatten", "start_dim", start_dim or 2)
  self.end_dim = check_dim("nn.Flatten", "end_dim", end_dim or -1)
end
function Flatten:forward(x)
  return x:flatten(self.start_dim, self.end_dim)
end

local Unflatten = Module:extend("Unflatten")
function Unflatten:init(dim, sizes)
  self.dim = check_dim("nn.Unflatten", "dim", dim)
  if type(sizes) ~= "table" or #sizes == 0 then
    args.error("nn.Unflatten: sizes must be a table of numbers, got " .. tostring(sizes))
  end
  self.sizes = sizes
end
function Unflatten:forward(x)
  local shape, d = x.shape, self.dim
  if d < 0 then d = #shape + 1 + d end
  local out = {}
  for i = 1, d - 1 do out[#out + 1] = shape[i] end
  for _, s in ipairs(self.sizes) do out[#out + 1] = s end
  for i = d + 1, #shape do out[#out + 1] = shape[i] end
  return x:reshape(out)
end

return { Flatten = Flatten, Unflatten = Unflatten }
