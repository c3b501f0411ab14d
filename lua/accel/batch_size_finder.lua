-- accel.find_executable_batch_size(fn, start): calls fn(batch_size),
-- halving the batch size each time fn runs out of memory, until it
-- succeeds; returns fn's results. Other errors pass through unchanged.
local function is_out_of_memory(err)
  local text = tostring(err)
  return text:find("out of memory", 1, true) ~= nil
      or text:find("can't allocate memory", 1, true) ~= nil
      or text:find("Cannot allocate memory", 1, true) ~= nil
end

return function(fn, start)
  local batch_size = start or 128
  while true do
    if batch_size < 1 then
      error("find_executable_batch_size: no batch size down to 1 fits in memory", 2)
    end
    local results = { pcall(fn, batch_size) }
    if results[1] then return unpack(results, 2, table.maxn(results)) end
    if not is_out_of_memory(results[2]) then error(results[2], 0) end
    collectgarbage()
    collectgarbage()
    batch_size = math.floor(batch_size / 2)
  end
end
