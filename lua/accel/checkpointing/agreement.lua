-- How ranks save and load a checkpoint together without one failing alone.
local rank_list = require("accel.util.rank_list")
local gathering = require("accel.gathering")
local guard = require("accel.collective_guard")

local agreement = {}

-- Each rank does its own part of a save or a load (its files, its loaders)
-- under pcall, then the ranks exchange how it went, and when any failed
-- every rank raises the same error. A rank failing alone would otherwise
-- leave the others in the save's next collective, waiting out --timeout or
-- pairing it with whatever collective the failing rank's recipe calls next.
-- The error is raised together (collective_guard.lua), so a recipe may catch
-- it with pcall and go on: every rank stands at the same point.

-- A caught error's message without the "file.lua:12: " that error() put in front.
function agreement.reason(err)
  return (tostring(err):gsub("^[^\n]-%.lua:%d+: ", ""))
end

-- What this rank tells the others about fn(...): {value = its result}, or
-- {failure = why} when it raised.
function agreement.try(fn, ...)
  local ok, result = pcall(fn, ...)
  if ok then return { value = result } end
  return { failure = agreement.reason(result) }
end

-- When any of `reports` (every rank's, in rank order) failed, runs `undo`
-- (if given) and raises on every rank one message naming each failing rank
-- and its reason; ranks that failed alike share one entry ("ranks 0, 1: ...").
function agreement.raise_failures(c, where, reports, undo)
  local reasons, ranks_of = {}, {}
  for r, report in ipairs(reports) do
    local why = report.failure
    if why then
      if not ranks_of[why] then
        reasons[#reasons + 1] = why
        ranks_of[why] = {}
      end
      table.insert(ranks_of[why], r - 1)
    end
  end
  if #reasons == 0 then return end
  if undo then undo() end
  for i, why in ipairs(reasons) do
    if c.state.num_processes > 1 then reasons[i] = rank_list(ranks_of[why]) .. ": " .. why end
  end
  guard.raise_together(where .. ": " .. table.concat(reasons, "; "))
end

-- Gathers every rank's report and raises if any failed; returns the reports.
function agreement.agree(c, where, mine)
  local reports = gathering.gather_object(c.state._world, mine)
  agreement.raise_failures(c, where, reports)
  return reports
end

return agreement
