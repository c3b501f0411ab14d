-- A table's keys in one order on every rank (Lua's `pairs` order differs
-- between processes): numbers ascending, then strings sorted.
return function(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) then return a < b end
    return type(a) == "number"
  end)
  return keys
end
