-- Pipeline schedules as data (accel.parallel.pipeline): every schedule is
-- built and validated for PP 1-8, virtual stages 1-4 where it runs them and
-- micro-batches 1-32; the sizes torchtitan refuses are refused naming
-- them; broken schedules are refused naming the action; and the bubble the
-- simulation measures (F = 1, B = 2, or B = W = 1 when split) is the papers'.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local schedules = require("accel.parallel.pipeline.schedules")
local schedule_check = require("accel.parallel.pipeline.schedule_check")

local built, refused = 0, 0
local interleaved_bubble = {}  -- Interleaved1F1B's, by "pp v m", for the zero-bubble comparison
for _, name in ipairs(schedules.NAMES) do
  local virtual = name:find("Interleaved") and 4 or 1
  for pp = 1, 8 do
    for v = 1, virtual do
      for m = 1, 32 do
        local ok, s = pcall(schedules.build, name, { pp = pp, virtual_stages = v, microbatches = m })
        if ok then
          built = built + 1
          local bubble = s.timing.bubble
          -- GPipe and 1F1B: (p - 1) / m (GPipe, Huang et al.; PipeDream-Flush,
          -- Narayanan et al.); interleaved 1F1B over v virtual stages:
          -- (p - 1) / (v m) (Narayanan et al. 2021) when m is a multiple of p.
          local sizes = pp .. " " .. v .. " " .. m
          if name == "Interleaved1F1B" then interleaved_bubble[sizes] = bubble end
          if name == "GPipe" or name == "1F1B" or (name == "Interleaved1F1B" and m % pp == 0) then
            check.near(bubble, (pp - 1) / (v * m), 1e-12, string.format("%s pp %d v %d m %d bubble", name, pp, v, m))
          elseif name == "InterleavedZeroBubble" then
            -- W fills idle time: below interleaved 1F1B's bubble (for pp > 1).
            local base = interleaved_bubble[sizes]
            check.truthy(bubble <= base * (1 + 1e-12),
                         string.format("%s pp %d v %d m %d bubble %g <= %g", name, pp, v, m, bubble, base))
            if pp > 1 then check.truthy(bubble < base, name .. " " .. sizes .. " smaller bubble") end
          end
        else
          refused = refused + 1
          local message = tostring(s)
          -- The refusals are torchtitan's: fewer micro-batches than ranks for a
          -- 1F1B-style schedule, or micro-batches not in whole rounds.
          if m < pp then
            check.truthy(name ~= "GPipe", "GPipe runs any number of micro-batches")
            check.truthy(message:find(string.format("pp_microbatches = %d < pp_size = %d", m, pp), 1, true), message)
          else
            check.truthy(v > 1 and message:find("is not a multiple of its", 1, true), message)
          end
        end
      end
    end
  end
end
check.truthy(built >= 1750, "schedules built: " .. built)
print(string.format("pipeline schedules: %d built and validated, %d refused", built, refused))

-- The zero-bubble schedule at v = 1 with F = B = W = 1: 2 (p - 1) idle steps
-- on 3 m busy ones, two thirds of 1F1B's (p - 1) / m.
check.near(schedules.build("InterleavedZeroBubble", { pp = 4, microbatches = 8 }).timing.bubble, 2 * 3 / (3 * 8), 1e-12,
           "zero bubble pp 4 m 8")
check.equal(schedules.build("InterleavedZeroBubble", { pp = 2, microbatches = 2 }).split_backward, true, "W split")

-- Refusals of the sizes.
check.raises(function() schedules.build("1F1B", { pp = 4, microbatches = 3 }) end, "1F1B m < pp",
             "1F1B needs at least as many micro-batches", "pp_microbatches = 3 < pp_size = 4")
check.raises(function() schedules.build("GPipe", { pp = 2, microbatches = 4, virtual_stages = 2 }) end, "GPipe v",
             "GPipe runs one stage per rank", "pp_virtual_stages = 2")
check.raises(function() schedules.build("ZBV", { pp = 2 }) end, "unknown", "unknown pp_schedule \"ZBV\"", "GPipe, 1F1B")
check.raises(function() schedules.build("GPipe", { pp = 2, microbatches = 0 }) end, "m 0", "microbatches")
check.raises(function() schedules.build("GPipe", { pp = 2, stages = 2 }) end, "unknown key", "stages")

-- Broken schedules, each from a valid one.
local function broken(name, options, edit)
  local s = schedules.build(name, options)
  edit(s.ranks)
  return function() schedule_check.validate(s) end
end
local function find(list, kind, stage, mb)
  for i, a in ipairs(list) do
    if a.kind == kind and a.stage == stage and a.microbatch == mb then return i end
  end
end
-- A B before its F: rank 1's first B moved to the front.
check.raises(broken("GPipe", { pp = 2, microbatches = 2 }, function(ranks)
  local list = ranks[2]
  table.insert(list, 1, table.remove(list, find(list, "B", 2, 1)))
end), "B before F", "rank 1 action 1 (B stage 2 micro-batch 1) comes before the F stage 2 micro-batch 1 it needs")
-- A missing recv: rank 1's receive of micro-batch 2's activations dropped.
check.raises(broken("1F1B", { pp = 2, microbatches = 2 }, function(ranks)
  table.remove(ranks[2], find(ranks[2], "RECV_F", 2, 2))
end), "missing recv", "rank 0 action", "SEND_F stage 1 micro-batch 2) has no matching RECV_F stage 2 micro-batch 2 on rank 1")
-- A cross-rank cycle: rank 0 waits for a gradient before it sends the
-- activations that gradient needs.
check.raises(broken("GPipe", { pp = 2, microbatches = 1 }, function(ranks)
  local list = ranks[1]
  table.insert(list, 1, table.remove(list, find(list, "RECV_B", 1, 1)))
end), "cycle", "deadlocks: rank 0 action 1 (RECV_B stage 1 micro-batch 1) waits for SEND_B stage 2 micro-batch 1 on rank 1",
   "rank 1 action 1 (RECV_F stage 2 micro-batch 1) waits for SEND_F stage 1 micro-batch 1 on rank 0",
   "(a cycle between ranks)")
-- Sends out of the order their receiver takes them (the transfers between
-- two ranks pair in order): rank 0's GPipe send of micro-batch 1 after micro-batch 2's.
check.raises(broken("GPipe", { pp = 2, microbatches = 2 }, function(ranks)
  local list = ranks[1]
  local first = table.remove(list, find(list, "SEND_F", 1, 1))
  table.insert(list, find(list, "SEND_F", 1, 2) + 1, first)
end), "sends out of order", "(SEND_F stage 1 micro-batch 2) is rank 0's send 1 to rank 1, which that rank receives as "
   .. "RECV_F stage 2 micro-batch 1: sends to a rank must come in the order it receives them")
-- A missing W in a split schedule; an action on the wrong rank; a duplicate.
check.raises(broken("InterleavedZeroBubble", { pp = 2, microbatches = 2 }, function(ranks)
  table.remove(ranks[1], find(ranks[1], "W", 1, 2))
end), "missing W", "rank 0 never runs W stage 1 micro-batch 2")
check.raises(broken("GPipe", { pp = 2, microbatches = 2 }, function(ranks)
  ranks[1][1].stage = 2
end), "wrong rank", "rank 0 action 1 (F stage 2 micro-batch 1): stage 2 is on rank 1")
check.raises(broken("GPipe", { pp = 2, microbatches = 2 }, function(ranks)
  table.insert(ranks[1], { kind = "F", stage = 1, microbatch = 1 })
end), "duplicate", "F stage 1 micro-batch 1): already action 1 of that rank")
-- A forward whose input never arrives: rank 1's RECV_F and rank 0's SEND_F both gone.
check.raises(broken("GPipe", { pp = 2, microbatches = 1 }, function(ranks)
  table.remove(ranks[1], find(ranks[1], "SEND_F", 1, 1))
  table.remove(ranks[2], find(ranks[2], "RECV_F", 2, 1))
end), "no recv at all", "rank 1 action 1 (F stage 2 micro-batch 1) needs RECV_F stage 2 micro-batch 1 on rank 1")
print("pipeline schedules: " .. check.passed .. " checks passed")
