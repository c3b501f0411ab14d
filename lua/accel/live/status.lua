-- What `accel-run ctl status` shows of each rank: its step, last loss,
-- learning rate, tokens (backward's num_items) per second and memory. Each
-- rank publishes its line to the store at most every PUBLISH_SECONDS (and
-- when it pauses), so asking costs the training nothing: the launcher
-- answers from the store.
local core = require("accel.core")

local status = {}
local Status = {}
Status.__index = Status

local PUBLISH_SECONDS = 0.2

function status.new(acc)
  return setmetatable({ acc = acc, items = 0, last_items = 0, published = -math.huge }, Status)
end

function Status:saw_backward(loss, options)
  self.loss = type(loss) == "number" and loss or loss:detach()
  local n = type(options) == "table" and options.num_items or nil
  if type(n) == "number" then self.items = self.items + n end
end

function Status:saw_step(step)
  self.step = step
end

local function resident_mib()
  local f = io.open("/proc/self/statm")
  if not f then return nil end
  local pages = f:read("*n") and f:read("*n")
  f:close()
  return pages and pages * 4096 / 2 ^ 20
end

function Status:line(step, opt, paused)
  local now = core.time()
  local parts = { (paused and "paused at step " or "step ") .. step }
  if self.loss ~= nil then
    local ok, value = pcall(function() return type(self.loss) == "number" and self.loss or self.loss:item() end)
    if ok then parts[#parts + 1] = string.format("loss %.6g", value) end
  end
  local ok, lr = pcall(opt.option, opt, "lr", 1)
  if ok and type(lr) == "number" then parts[#parts + 1] = string.format("lr %.6g", lr) end
  if self.last_time and now > self.last_time and self.items > self.last_items then
    parts[#parts + 1] = string.format("tokens/s %.0f", (self.items - self.last_items) / (now - self.last_time))
  end
  local rss = resident_mib()
  if rss then parts[#parts + 1] = string.format("memory %.0f MiB", rss) end
  local device = tostring(self.acc.device or "cpu")
  if device:match("^cuda") then
    local used = pcall(core.cuda.memory_allocated) and core.cuda.memory_allocated() or nil
    if used then parts[#parts + 1] = string.format("cuda %.0f MiB", used / 2 ^ 20) end
  end
  self.last_time, self.last_items = now, self.items
  return table.concat(parts, "  ")
end

-- Publishes when PUBLISH_SECONDS have passed since the last time (always
-- when `paused`).
function Status:publish(store, keys, rank, step, opt, paused)
  local now = core.time()
  if not paused and now - self.published < PUBLISH_SECONDS then return end
  self.published = now
  store:set(keys .. "status/" .. rank, self:line(step, opt, paused))
end

-- `text` as a JSON string, for the control log.
function status.json_string(text)
  return '"' .. text:gsub('[%c"\\]', function(c)
    local named = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r" }
    return named[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

return status
