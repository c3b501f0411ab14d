-- The process's resident memory in bytes (/proc/self/statm), for the tests
-- that check memory stays flat:
--   local resident_bytes = dofile(here .. "helpers/resident_bytes.lua")
return function()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("*n", "*n")
  f:close()
  return resident * 4096
end
