-- nproc: 1
-- A SHARDED_STATE_DICT layout read from a checkpoint is checked before the
-- load slices anything by it; a field of the wrong kind is an error naming
-- the file and the field.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local sharded_state = require("accel.parallel.checkpoint.flat_shards")

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
  { function(l) l.flats[1].params[1].shape = { 2, 4, x = 1 } end, "flats[1].params[1].shape must be a list, but has the key x" },
  { function(l) l.flats[1].numel = 2.5 end, "flats[1].numel must be a whole number" },
  { function(l) l.flats[1].params[2].name = 7 end, "flats[1].params[2].name must be a string" },
  { function(l) l.flats[1].params[1].offset = -4 end, "flats[1].params[1].offset must be a whole number of at least 0" },
  { function(l) l.flats[1].params[1].shape = { 2, "4" } end, "flats[1].params[1].shape[2] must be a whole number" },
  { function(l) l.group_sizes = nil end, "group_sizes must be a list, got a nil" },
  -- Numbers of the right kind that disagree with the flats: refused before
  -- anything is allocated or sliced by them.
  { function(l) l.group_sizes = { 1e9 } end, "group_sizes count 1000000000 parameters but the flats list 2" },
  { function(l) l.flats[1].params[2].offset = 9 end, "flats[1].params[2] ('fc.bias') ends at element 11 of a flat parameter of 10" },
  { function(l) l.flats[1].params[1].shape = { 2, 1e9 } end, "('fc.weight') ends at element 2000000000" },
  { function(l) l.flats[1].shard_numel = 4 end, "flats[1]: 2 ranks' shards of 4 elements cannot hold its 10" },
  { function(l) l.flats[1].params[2].optimizer_index = 0 end, "('fc.bias') has optimizer_index 0, listed twice" },
  { function(l) l.flats[1].params[2].optimizer_index = 5 end, "optimizer_index 5 is past the 2 parameters" },
}
for _, case in ipairs(cases) do
  local l = layout()
  case[1](l)
  check.raises(function() sharded_state.check_layout(l, "ck/model_sharding.lua") end, case[2],
               "'ck/model_sharding.lua': ", case[2])
end
-- Slices that are not the layout's shards are refused naming the rank, the
-- slice and the layout's file, not by a slicing error.
local files = { { flat_1 = accel.zeros(5) }, { flat_1 = accel.zeros(3) } }
check.raises(function() sharded_state.full_model(layout(), files, "ck/model_sharding.lua") end,
             "a slice of the wrong size", "rank 1's 'flat_1' is [3] where 'ck/model_sharding.lua' says a shard of 5 elements")
files[2].flat_1 = nil
check.raises(function() sharded_state.full_model(layout(), files, "ck/model_sharding.lua") end,
             "a missing slice", "rank 1's file lacks 'flat_1' that 'ck/model_sharding.lua' lists")
files[2].flat_1 = accel.arange(6, 11):float()
files[1].flat_1 = accel.arange(1, 6):float()
local full = sharded_state.full_model(layout(), files, "ck/model_sharding.lua")
check.near(full["fc.bias"], { 9, 10 }, 0, "slices of the right size join and cut as the layout says")
check.done("sharded state layout")
