-- A /proc/self/status figure in bytes (VmRSS, VmHWM, RssAnon, RssFile), for
-- accel_side.lua and phases.lua:
--   local status = dofile(<this folder> .. "proc_status.lua"); status("VmHWM")
return function(key)
  for line in io.lines("/proc/self/status") do
    local kib = line:match("^" .. key .. ":%s+(%d+)")
    if kib then return tonumber(kib) * 1024 end
  end
  error("no " .. key .. " in /proc/self/status")
end
