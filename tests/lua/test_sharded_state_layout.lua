-- nproc: 1
-- A SHARDED_STATE_DICT layout read from a checkpoint is checked before the
-- load slices anything by it; a field of the wrong kind is an error naming
-- the file and the field.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local sharded_state = require("accel.sharding.sharded_state")

local function layout()
  return { world_size = 2, optimizer = 1, group_sizes = { 2 }, stage = 3,
           flats = { { numel = 10, shard_numel = 5, optimizer_index = 0,
                       params = { { name = "fc.weight", offset = 0, shape = { 2, 4 }, optimizer_index = 0 },
                                  { name = "fc.bias", offset = 8, shape = { 2 }, optimizer_index = 1 } } } } }
end

check.truthy(sharded_state.check_layout(layout(), "ck/model_sharding.lua"), "a layout as saved passes")

local cases = {
  { function(l) l.world_size = 0 end, "world_size must be a whole number of at least 1, got 0" },
  { function(l) l.optimizer = "1" end, "optimizer must be a whole number" },
  { function(l) l.flats = 3 end, "flats must be a list, got a number" },
  { function(l) l.flats[1].numel = 2.5 end, "flats[1].numel must be a whole number" },
  { function(l) l.flats[1].params[2].name = 7 end, "flats[1].params[2].name must be a string" },
  { function(l) l.flats[1].params[1].offset = -4 end, "flats[1].params[1].offset must be a whole number of at least 0" },
  { function(l) l.flats[1].params[1].shape = { 2, "4" } end, "flats[1].params[1].shape[2] must be a whole number" },
  { function(l) l.group_sizes = nil end, "group_sizes must be a list, got a nil" },
}
for _, case in ipairs(cases) do
  local l = layout()
  case[1](l)
  check.raises(function() sharded_state.check_layout(l, "ck/model_sharding.lua") end, case[2],
               "'ck/model_sharding.lua': ", case[2])
end
check.done("sharded state layout")
