-- Pipeline schedules as data (torchtitan's and torch.distributed.pipelining's
-- names): for `pp` ranks, `virtual_stages` stages per rank and
-- `microbatches` micro-batches, the list of actions each rank runs, in order.
--   local schedules = require("accel.parallel.pipeline.schedules")
--   local s = schedules.build("1F1B", { pp = 4, microbatches = 8 })
--   s.ranks[1]  -- pp rank 0's actions: {kind = "F", stage = 1, microbatch = 1}, ...
-- Kinds: "F" (forward), "B" (backward: the input gradient, and the weight
-- gradient too unless the schedule has "W" actions), "W" (the weight
-- gradient, split from B by the zero-bubble schedule), and the
-- point-to-point actions between ranks: SEND_F of stage s sends its output
-- to stage s + 1, RECV_F of stage s receives its input from stage s - 1,
-- SEND_B of stage s sends its input gradient to stage s - 1, RECV_B of
-- stage s receives its output gradient from stage s + 1. Stages and
-- micro-batches are 1-based (Lua indices), pp ranks 0-based (as every rank
-- in accel); s.ranks[r + 1] is rank r's list, s.placement[stage] its rank.
-- schedule_check.lua validates every schedule built here before it is
-- returned; a recipe's own schedule goes through the same check.
--
-- Written in Lua, not in engine/parallel/: the schedule is pure logic over
-- small tables, consumed where the stages run (the Lua side, which calls the
-- point-to-point ops), and its tests then need no C++ build.
local args = require("accel.util.args")
local schedule_check = require("accel.parallel.pipeline.schedule_check")

local schedules = {}

local function action(kind, stage, microbatch)
  return { kind = kind, stage = stage, microbatch = microbatch }
end

-- Looped placement (torchtitan's for every schedule here): stage s on rank
-- (s - 1) % pp, so rank r holds stages r + 1, r + 1 + pp, ...
local function looped_placement(pp, v)
  local placement = {}
  for s = 1, pp * v do placement[s] = (s - 1) % pp end
  return placement
end

-- GPipe: every forward, then every backward.
local function gpipe_order(pp, _, m, r)
  local order = {}
  for mb = 1, m do order[#order + 1] = action("F", r + 1, mb) end
  for mb = 1, m do order[#order + 1] = action("B", r + 1, mb) end
  return order
end

-- Interleaved 1F1B (Megatron-LM's, in rounds of g = m / (m // pp)
-- micro-batches as torch.distributed.pipelining's): rank r's k-th forward
-- (0-based) runs its chunk (k // g) % v on micro-batch (k // (g v)) g + k % g,
-- its backwards visit the chunks in reverse; (v - 1) g + 2 (pp - r - 1)
-- warm-up forwards, then one forward and one backward in turn. With v = 1
-- and 1F1B's warm-up of pp - r - 1 this is 1F1B.
local function round_size(pp, v, m)
  if v == 1 then return m end
  return m / math.max(1, math.floor(m / pp))
end

local function interleaved_order(pp, v, m, r, warmup)
  local g = round_size(pp, v, m)
  local total = m * v
  local function nth(k, backward)
    local chunk = math.floor(k / g) % v
    if backward then chunk = v - 1 - chunk end
    return chunk * pp + r + 1, math.floor(k / (g * v)) * g + k % g + 1
  end
  warmup = math.min(total, warmup or (v - 1) * g + 2 * (pp - r - 1))
  local order, f, b = {}, 0, 0
  local function forward() order[#order + 1] = action("F", nth(f, false)); f = f + 1 end
  local function backward() order[#order + 1] = action("B", nth(b, true)); b = b + 1 end
  for _ = 1, warmup do forward() end
  while f < total do forward(); backward() end
  while b < total do backward() end
  return order
end

local function one_f_one_b_order(pp, v, m, r)
  return interleaved_order(pp, v, m, r, pp - r - 1)
end

-- Zero bubble (ZB-H1, Qi et al. 2023, interleaved over looped stages as
-- torchtitan's InterleavedZeroBubble): B computes only the input gradient,
-- W the weight gradient, and W fills the ranks' idle time. The order is
-- found by stepping all ranks in unit time (F = B = W = 1): a free rank
-- runs a ready B first (it is on the critical path), else a ready F while
-- it holds fewer micro-batches' activations than interleaved 1F1B's
-- warm-up plus one (so no more memory), else its oldest pending W.
local function zero_bubble_orders(pp, v, m)
  local n = pp * v
  local done, orders, pending_w, held, limit = {}, {}, {}, {}, {}
  for r = 0, pp - 1 do
    orders[r + 1], pending_w[r + 1], held[r + 1] = {}, {}, 0
    limit[r + 1] = math.min(m * v, (v - 1) * round_size(pp, v, m) + (pp - r - 1)) + 1
  end
  local function key(kind, s, mb) return kind .. s .. ":" .. mb end
  local function ready(kind, s, mb, t)
    local function at(k) return done[k] and done[k] <= t end
    if kind == "F" then return s == 1 or at(key("F", s - 1, mb)) end
    return at(key("F", s, mb)) and (s == n or at(key("B", s + 1, mb)))
  end
  -- Each rank's candidates, in the order interleaved 1F1B would take them.
  local forwards, backwards = {}, {}
  for r = 0, pp - 1 do
    forwards[r + 1], backwards[r + 1] = {}, {}
    for _, a in ipairs(interleaved_order(pp, v, m, r)) do
      local list = a.kind == "F" and forwards[r + 1] or backwards[r + 1]
      list[#list + 1] = a
    end
  end
  local remaining, t = 3 * n * m, 0
  while remaining > 0 do
    local ran = {}
    for r = 1, pp do
      local pick
      for i, a in ipairs(backwards[r]) do
        if ready("B", a.stage, a.microbatch, t) then pick = table.remove(backwards[r], i); break end
      end
      if not pick and held[r] < limit[r] then
        local a = forwards[r][1]
        if a and ready("F", a.stage, a.microbatch, t) then pick = table.remove(forwards[r], 1) end
      end
      if pick then
        if pick.kind == "F" then held[r] = held[r] + 1 else table.insert(pending_w[r], pick) end
      elseif pending_w[r][1] then
        local b = table.remove(pending_w[r], 1)
        pick = action("W", b.stage, b.microbatch)
        held[r] = held[r] - 1
      end
      if pick then
        orders[r][#orders[r] + 1] = pick
        ran[#ran + 1] = pick
      end
    end
    if #ran == 0 and t > 3 * n * m * pp then
      error("accel.parallel.pipeline: the zero-bubble order did not finish (a bug in schedules.lua)")
    end
    for _, a in ipairs(ran) do done[key(a.kind, a.stage, a.microbatch)] = t + 1 end
    remaining = remaining - #ran
    t = t + 1
  end
  return orders
end

-- Each schedule: whether it runs several stages per rank, whether it needs
-- at least pp micro-batches (as torchtitan refuses fewer for 1F1B-style
-- schedules: the warm-up would not fill the pipeline), and its compute
-- order per rank.
local SCHEDULES = {
  GPipe = { virtual = false, order = gpipe_order },
  ["1F1B"] = { virtual = false, needs_full_pipeline = true, order = one_f_one_b_order },
  Interleaved1F1B = { virtual = true, needs_full_pipeline = true, order = interleaved_order },
  InterleavedZeroBubble = { virtual = true, needs_full_pipeline = true, split_backward = true,
                            orders = zero_bubble_orders },
}

schedules.NAMES = { "GPipe", "1F1B", "Interleaved1F1B", "InterleavedZeroBubble" }

-- The point-to-point actions around every rank's compute order (`orders`,
-- by rank + 1): a stage's input received just before its forward, its
-- output's gradient just before its backward; each send as soon as its
-- tensor is made, in the order its receiver posts the receives. The
-- transfers between two ranks pair in order (engine/comm/tensor_exchange.h:
-- the nth send with the nth receive), so a rank that makes two tensors for
-- a peer in the other order than the peer takes them (the zero-bubble
-- schedule's W actions shift its Bs) holds the second until the first is
-- sent. That never adds a wait: the receiver takes them in its order
-- anyway, and sends do not wait for their receive (as isend).
local function with_transfers(orders, placement, n)
  local pp = #orders
  local function message(kind, s, mb)  -- the receive's key: what arrives where
    return kind .. " " .. s .. " " .. mb
  end
  -- Each rank's compute order with its receives, and the order each peer's
  -- messages are received in: wanted[from][to] = {message, ...}.
  local ranks, wanted = {}, {}
  for r = 0, pp - 1 do wanted[r] = {} end
  for r = 0, pp - 1 do
    local out = {}
    for _, a in ipairs(orders[r + 1]) do
      local s, mb = a.stage, a.microbatch
      local from = (a.kind == "F" and s > 1 and placement[s - 1]) or (a.kind == "B" and s < n and placement[s + 1])
      if from and from ~= r then
        local kind = a.kind == "F" and "RECV_F" or "RECV_B"
        out[#out + 1] = action(kind, s, mb)
        wanted[from][r] = wanted[from][r] or {}
        table.insert(wanted[from][r], message(kind, s, mb))
      end
      out[#out + 1] = a
    end
    ranks[r + 1] = out
  end
  -- The sends, each peer's in the order that peer receives them.
  for r = 0, pp - 1 do
    local out, ready, next_of = {}, {}, {}
    local function flush(to)
      local queue = wanted[r][to] or {}
      while next_of[to] <= #queue and ready[queue[next_of[to]]] do
        out[#out + 1] = ready[queue[next_of[to]]]
        next_of[to] = next_of[to] + 1
      end
    end
    for q = 0, pp - 1 do next_of[q] = 1 end
    for _, a in ipairs(ranks[r + 1]) do
      out[#out + 1] = a
      local s, mb = a.stage, a.microbatch
      if a.kind == "F" and s < n and placement[s + 1] ~= r then
        ready[message("RECV_F", s + 1, mb)] = action("SEND_F", s, mb)
        flush(placement[s + 1])
      elseif a.kind == "B" and s > 1 and placement[s - 1] ~= r then
        ready[message("RECV_B", s - 1, mb)] = action("SEND_B", s, mb)
        flush(placement[s - 1])
      end
    end
    ranks[r + 1] = out
  end
  return ranks
end

local where = "accel.parallel.pipeline.schedules.build"

-- The schedule `name` for options {pp, microbatches, virtual_stages = 1},
-- validated (schedule_check.validate); its `timing` is the simulation's.
function schedules.build(name, options)
  local o = args.options(where, options, { pp = 1, microbatches = 1, virtual_stages = 1 })
  local spec = SCHEDULES[name]
  if not spec then
    args.error(string.format("%s: unknown pp_schedule %q (known: %s)", where, tostring(name),
                             table.concat(schedules.NAMES, ", ")))
  end
  local pp, m, v = o.pp, o.microbatches, o.virtual_stages
  args.positive_integer(where, "pp", pp)
  args.positive_integer(where, "microbatches", m)
  args.positive_integer(where, "virtual_stages", v)
  if v > 1 and not spec.virtual then
    args.error(string.format("%s: %s runs one stage per rank; pp_virtual_stages = %d needs Interleaved1F1B or "
                             .. "InterleavedZeroBubble", where, name, v))
  end
  if spec.needs_full_pipeline and m < pp then
    args.error(string.format("%s: %s needs at least as many micro-batches as pipeline ranks: pp_microbatches = %d "
                             .. "< pp_size = %d", where, name, m, pp))
  end
  local rounds = math.max(1, math.floor(m / pp))
  if spec.virtual and v > 1 and m % rounds ~= 0 then
    args.error(string.format("%s: %s runs the micro-batches in rounds of pp_size = %d or more: pp_microbatches = %d "
                             .. "is not a multiple of its %d rounds", where, name, pp, m, rounds))
  end
  local placement = looped_placement(pp, v)
  local orders = spec.orders and spec.orders(pp, v, m) or {}
  local s = { name = name, pp = pp, stages = pp * v, microbatches = m, placement = placement,
              split_backward = spec.split_backward or false, ranks = {} }
  for r = 0, pp - 1 do orders[r + 1] = orders[r + 1] or spec.order(pp, v, m, r) end
  s.ranks = with_transfers(orders, placement, s.stages)
  s.timing = schedule_check.validate(s)
  return s
end

-- The schedule a ParallelismConfig asks for (its pp_schedule, pp_size,
-- pp_microbatches and pp_virtual_stages).
function schedules.of_config(config)
  return schedules.build(config.pp_schedule, { pp = config.pp_size, microbatches = config.pp_microbatches,
                                               virtual_stages = config.pp_virtual_stages })
end

return schedules
