-- accel.progress(iterable, {desc, total, disable, interval}): a progress
-- bar, as tqdm, shown by the main process only (other ranks print nothing).
--   local bar = accel.progress(loader, { desc = "epoch 1" })
--   for x, y in bar do ... bar:set_postfix{ loss = l } end
-- `iterable` is a data loader, an array, a count n (1..n) or an iterator
-- function (then give `total` for a percentage and a remaining time).
--
-- Where it is drawn: rank 0's stdout is accel-run's own unless --log-dir
-- is given (then it is a pipe to the log), and other ranks' go through
-- accel-run's line relay. So a rank whose stdout is a terminal redraws one
-- live line in place (carriage return, at most 1 / `refresh` times a
-- second); anywhere else (a pipe, a file, --log-dir, TERM=dumb) it prints a
-- plain line every `interval` seconds (default 10) and at the end, with no
-- control characters, which the relay passes on whole.
local core = require("accel.core")
local args = require("accel.util.args")

local Progress = {}
Progress.__index = Progress

-- The live bar's redraws are at least this far apart, in seconds.
local REFRESH = 0.2
local BAR_WIDTH = 20

local function clock_text(seconds)
  if seconds ~= seconds or seconds == math.huge then return "?" end
  seconds = math.floor(seconds + 0.5)
  local h, m, s = math.floor(seconds / 3600), math.floor(seconds / 60) % 60, seconds % 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, s) end
  return string.format("%02d:%02d", m, s)
end

local function value_text(value)
  if type(value) == "userdata" and value.item then value = value:item() end
  if type(value) == "number" then
    if value % 1 == 0 and math.abs(value) < 1e15 then return string.format("%d", value) end
    return string.format("%.4g", value)
  end
  return tostring(value)
end

-- Display columns of UTF-8 text (one per character: the bar's blocks and
-- most text are narrow).
local function columns(text)
  local _, continuation = text:gsub("[\128-\191]", "")
  return #text - continuation
end

-- The first `width` columns of `text`.
local function clip(text, width)
  if columns(text) <= width then return text end
  local out, n = {}, 0
  for char in text:gmatch("[^\128-\191][\128-\191]*") do
    if n == width then break end
    out[#out + 1] = char
    n = n + 1
  end
  return table.concat(out)
end

-- "desc: 45%|█████████           | 45/100 [00:12<00:15, 3.71it/s, loss=0.412]"
function Progress:line(live)
  local elapsed = core.time() - self.start
  local rate = self.n > 0 and elapsed > 0 and self.n / elapsed or nil
  local parts = {}
  if self.desc then parts[#parts + 1] = self.desc .. ": " end
  if self.total then
    local fraction = self.total > 0 and math.min(self.n / self.total, 1) or 1
    parts[#parts + 1] = string.format("%3d%%", math.floor(fraction * 100))
    if live then
      local full = math.floor(fraction * BAR_WIDTH)
      parts[#parts + 1] = "|" .. string.rep("\226\150\136", full) .. string.rep(" ", BAR_WIDTH - full) .. "|"
    end
    parts[#parts + 1] = string.format(" %d/%d", self.n, self.total)
  else
    parts[#parts + 1] = string.format("%d", self.n)
  end
  local timing = clock_text(elapsed)
  if self.total then
    timing = timing .. "<" .. (rate and clock_text((self.total - self.n) / rate) or "?")
  end
  if rate then
    timing = timing .. (rate >= 1 and string.format(", %.2fit/s", rate) or string.format(", %.2fs/it", 1 / rate))
  else
    timing = timing .. ", ?it/s"
  end
  if self.postfix ~= "" then timing = timing .. ", " .. self.postfix end
  parts[#parts + 1] = " [" .. timing .. "]"
  return table.concat(parts)
end

function Progress:draw(final)
  if self.disabled then return end
  local now = core.time()
  if self.live then
    if not final and now - self.drawn_at < REFRESH then return end
    local width = core.terminal_columns()
    local text = self:line(true)
    if width > 1 then text = clip(text, width - 1) end
    -- Back to the line's start, the new text, then erase what is left of the old one.
    io.stdout:write("\r", text, "\27[K", final and "\n" or "")
    io.stdout:flush()
  else
    if not final and now - self.drawn_at < self.interval then return end
    -- The last line need not repeat one just printed.
    if final and self.drawn_n == self.n and self.drawn_postfix == self.postfix then return end
    io.stdout:write(self:line(false), "\n")
    io.stdout:flush()
  end
  self.drawn_at, self.drawn_n, self.drawn_postfix = now, self.n, self.postfix
end

-- Counts `n` more items (1 by default) and redraws when due.
function Progress:update(n)
  self.n = self.n + (n or 1)
  self:draw(false)
end

-- Values shown after the timing: bar:set_postfix{loss = 0.41, lr = 1e-3}
-- (numbers, one-element tensors, strings; shown sorted by name).
function Progress:set_postfix(values)
  if type(values) ~= "table" then
    args.error("Progress:set_postfix: values must be a table, got a " .. type(values))
  end
  local names = {}
  for name in pairs(values) do names[#names + 1] = tostring(name) end
  table.sort(names)
  for i, name in ipairs(names) do names[i] = name .. "=" .. value_text(values[name]) end
  self.postfix = table.concat(names, ", ")
end

-- Draws the final state (and ends the live line); later calls do nothing.
function Progress:close()
  if self.closed then return end
  self.closed = true
  self:draw(true)
end

-- `for ... in bar do`: the values of the wrapped iterable, counted.
function Progress:__call()
  if self.closed then return nil end
  if self.started then self:update(1) end
  self.started = true
  local results = { self.next_item() }
  if results[1] == nil then
    self:close()
    return nil
  end
  return unpack(results, 1, table.maxn(results))
end

-- What to iterate and how many items it holds (nil: unknown).
local function items_of(iterable)
  if type(iterable) == "number" then
    local i = 0
    return function()
      if i >= iterable then return nil end
      i = i + 1
      return i
    end, iterable
  elseif type(iterable) == "function" then
    return iterable, nil
  elseif type(iterable) == "table" and type(iterable.iter) == "function" and type(iterable.num_batches) == "function" then
    return iterable:iter(), iterable:num_batches()
  elseif type(iterable) == "table" then
    local i = 0
    return function()
      i = i + 1
      return iterable[i]
    end, #iterable
  end
  args.error("accel.progress: expected a data loader, an array, a count or an iterator function, got a "
             .. type(iterable))
end

local function new(iterable, options)
  local o = args.options("accel.progress", options, {
    desc = args.NONE, total = args.NONE, disable = false, interval = 10,
  }, { desc = "string", total = "number", disable = "boolean", interval = "number" })
  local next_item, total = nil, o.total
  if iterable ~= nil then
    local count
    next_item, count = items_of(iterable)
    total = total or count
  end
  local rank = core.dist.state().rank
  local self = setmetatable({
    desc = o.desc, total = total, n = 0, postfix = "", interval = o.interval,
    next_item = next_item, start = core.time(), drawn_at = -math.huge,
    disabled = o.disable or rank ~= 0,
    live = core.stdout_is_terminal(),
  }, Progress)
  self:draw(false)
  return self
end

return new
