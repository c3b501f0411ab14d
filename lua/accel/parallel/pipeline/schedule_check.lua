-- The check every pipeline schedule passes before it runs (schedules.lua
-- describes the actions): each action names a stage of its own rank, each
-- (stage, micro-batch) has its F and B once (and its W once when the
-- schedule splits the weight gradient), each send has its receive (the
-- sends to a rank in the order that rank receives them), each
-- action's dependencies come before it on its rank, and a simulation of
-- all ranks in time shows that none waits forever. A refusal names the
-- rank, the action's place in that rank's list, its kind, stage and
-- micro-batch, and what it waits for.
--
-- The simulation also times the schedule: an action starts when its rank
-- is free and its dependencies have finished; F costs 1, B 2 (1 when W is
-- split from it), W 1, transfers nothing. The bubble is the idle fraction
-- (makespan - busy) / busy, the measure of the GPipe, 1F1B (Megatron-LM)
-- and zero-bubble papers.
local args = require("accel.util.args")

local schedule_check = {}

local KINDS = { F = true, B = true, W = true, SEND_F = true, RECV_F = true, SEND_B = true, RECV_B = true }

local function key(kind, stage, microbatch)
  return string.format("%s stage %d micro-batch %d", kind, stage, microbatch)
end

local function describe(r, index, a)
  return string.format("rank %d action %d (%s)", r, index, key(a.kind, a.stage, a.microbatch))
end

-- What action `a` on rank `r` needs first: a list of {key, rank}.
local function dependencies(a, r, s)
  local st, mb, n, at = a.stage, a.microbatch, s.stages, s.placement
  local deps = {}
  local function need(kind, stage, rank) deps[#deps + 1] = { key(kind, stage, mb), rank } end
  if a.kind == "F" and st > 1 then
    if at[st - 1] == r then need("F", st - 1, r) else need("RECV_F", st, r) end
  elseif a.kind == "RECV_F" then
    need("SEND_F", st - 1, at[st - 1])
  elseif a.kind == "SEND_F" or a.kind == "B" then
    need("F", st, r)
  elseif a.kind == "RECV_B" then
    need("SEND_B", st + 1, at[st + 1])
  elseif a.kind == "SEND_B" or a.kind == "W" then
    need("B", st, r)
  end
  if a.kind == "B" and st < n then
    if at[st + 1] == r then need("B", st + 1, r) else need("RECV_B", st, r) end
  end
  return deps
end

-- The transfer that must pair with a send, and where: {key, rank}.
local function partner(a, s)
  local st, mb = a.stage, a.microbatch
  if a.kind == "SEND_F" then return key("RECV_F", st + 1, mb), s.placement[st + 1] end
  if a.kind == "SEND_B" then return key("RECV_B", st - 1, mb), s.placement[st - 1] end
end

local function refuse(message)
  args.error("accel.parallel.pipeline: schedule " .. message)
end

-- Each rank's actions by key -> index, after the per-action checks.
local function index_actions(s)
  local positions = {}
  for i, list in ipairs(s.ranks) do
    local r = i - 1
    local mine = {}
    for index, a in ipairs(list) do
      if not KINDS[a.kind] then refuse(string.format("rank %d action %d: unknown kind %s", r, index, tostring(a.kind))) end
      if type(a.stage) ~= "number" or s.placement[a.stage] == nil
          or type(a.microbatch) ~= "number" or a.microbatch < 1 or a.microbatch > s.microbatches
          or a.microbatch % 1 ~= 0 then
        refuse(string.format("%s: the stage must be 1 to %d and the micro-batch 1 to %d", describe(r, index, a),
                             s.stages, s.microbatches))
      end
      if s.placement[a.stage] ~= r then
        refuse(string.format("%s: stage %d is on rank %d", describe(r, index, a), a.stage, s.placement[a.stage]))
      end
      local k = key(a.kind, a.stage, a.microbatch)
      if mine[k] then refuse(string.format("%s: already action %d of that rank", describe(r, index, a), mine[k])) end
      mine[k] = index
    end
    positions[i] = mine
  end
  return positions
end

-- Every stage's F and B (and W when split) for every micro-batch, once.
local function check_complete(s, positions)
  for st = 1, s.stages do
    local r = s.placement[st]
    for mb = 1, s.microbatches do
      for _, kind in ipairs(s.split_backward and { "F", "B", "W" } or { "F", "B" }) do
        if not positions[r + 1][key(kind, st, mb)] then
          refuse(string.format("rank %d never runs %s", r, key(kind, st, mb)))
        end
      end
    end
  end
end

-- Static order: each dependency exists and, on the action's own rank,
-- comes before it; each send has its receive.
local function check_order(s, positions)
  for i, list in ipairs(s.ranks) do
    local r = i - 1
    for index, a in ipairs(list) do
      for _, dep in ipairs(dependencies(a, r, s)) do
        local k, dep_rank = dep[1], dep[2]
        local at = positions[dep_rank + 1][k]
        if not at then
          refuse(string.format("%s needs %s on rank %d, which that rank never runs", describe(r, index, a), k, dep_rank))
        elseif dep_rank == r and at > index then
          refuse(string.format("%s comes before the %s it needs (action %d)", describe(r, index, a), k, at))
        end
      end
      local want, rank = partner(a, s)
      if want and not positions[rank + 1][want] then
        refuse(string.format("%s has no matching %s on rank %d", describe(r, index, a), want, rank))
      end
    end
  end
end

-- The transfers between two ranks pair in order (the nth send with the
-- nth receive, engine/comm/tensor_exchange.h): each rank's sends to a peer
-- must come in the order that peer receives them.
local function check_pairing(s)
  local received = {}  -- received[from][to] = {receive key, ...} in the receiver's order
  for i, list in ipairs(s.ranks) do
    for _, a in ipairs(list) do
      local from = (a.kind == "RECV_F" and s.placement[a.stage - 1]) or (a.kind == "RECV_B" and s.placement[a.stage + 1])
      if from then
        received[from] = received[from] or {}
        received[from][i - 1] = received[from][i - 1] or {}
        table.insert(received[from][i - 1], key(a.kind, a.stage, a.microbatch))
      end
    end
  end
  for i, list in ipairs(s.ranks) do
    local r, count = i - 1, {}
    for index, a in ipairs(list) do
      local want, to = partner(a, s)
      if want then
        count[to] = (count[to] or 0) + 1
        local expected = received[r] and received[r][to] and received[r][to][count[to]]
        if expected ~= want then
          refuse(string.format("%s is rank %d's send %d to rank %d, which that rank receives as %s: sends to a "
                               .. "rank must come in the order it receives them", describe(r, index, a), r, count[to],
                               to, tostring(expected)))
        end
      end
    end
  end
end

local COST = { F = 1, B = 2, W = 1, SEND_F = 0, RECV_F = 0, SEND_B = 0, RECV_B = 0 }

-- Runs every rank in order; returns the timing, or refuses naming the
-- first rank that can never go on and the chain of waits behind it.
local function simulate(s)
  local cost = setmetatable({ B = s.split_backward and 1 or 2 }, { __index = COST })
  local finished, next_index, clock = {}, {}, {}
  for i = 1, #s.ranks do next_index[i], clock[i] = 1, 0 end
  local function blocked_on(i)
    local a = s.ranks[i][next_index[i]]
    if not a then return nil end
    for _, dep in ipairs(dependencies(a, i - 1, s)) do
      if finished[dep[2] + 1 .. ":" .. dep[1]] == nil then return a, dep end
    end
    return a, nil
  end
  local progress = true
  while progress do
    progress = false
    for i = 1, #s.ranks do
      while true do
        local a, waiting = blocked_on(i)
        if not a or waiting then break end
        local start = clock[i]
        for _, dep in ipairs(dependencies(a, i - 1, s)) do
          start = math.max(start, finished[dep[2] + 1 .. ":" .. dep[1]])
        end
        clock[i] = start + cost[a.kind]
        finished[i .. ":" .. key(a.kind, a.stage, a.microbatch)] = clock[i]
        next_index[i] = next_index[i] + 1
        progress = true
      end
    end
  end
  for i = 1, #s.ranks do
    if blocked_on(i) then
      local chain, seen, j = {}, {}, i
      while j and not seen[j] do
        seen[j] = true
        local a, dep = blocked_on(j)
        chain[#chain + 1] = string.format("%s waits for %s on rank %d", describe(j - 1, next_index[j], a), dep[1], dep[2])
        j = dep[2] + 1
        if not blocked_on(j) then break end
      end
      refuse(string.format("deadlocks: %s%s", table.concat(chain, ", which is behind: "),
                           seen[j] and " (a cycle between ranks)" or ""))
    end
  end
  local makespan, busy = 0, 0
  for i = 1, #s.ranks do
    makespan = math.max(makespan, clock[i])
    local b = 0
    for _, a in ipairs(s.ranks[i]) do b = b + cost[a.kind] end
    busy = math.max(busy, b)
  end
  return { makespan = makespan, busy = busy, bubble = busy > 0 and (makespan - busy) / busy or 0 }
end

-- Validates schedule `s` ({pp, stages, microbatches, placement, split_backward,
-- ranks}); returns its timing {makespan, busy, bubble} or raises naming
-- the action at fault.
function schedule_check.validate(s)
  if #s.ranks ~= s.pp then refuse(string.format("has %d ranks' lists for pp = %d", #s.ranks, s.pp)) end
  local positions = index_actions(s)
  check_complete(s, positions)
  check_order(s, positions)
  check_pairing(s)
  return simulate(s)
end

return schedule_check
