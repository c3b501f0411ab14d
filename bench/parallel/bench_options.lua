-- What the benches of bench/parallel share, loaded with dofile next to
-- them: their key=number arguments, and the median of timed runs.
local bench_options = {}

-- The options `defaults` ({key = number}) with the script's `key=number`
-- arguments (arg) over them; a word in `flags` ({word = fn(o)}) calls its
-- function instead. Anything else is refused naming the script and what it
-- takes.
function bench_options.parse(script, defaults, flags)
  local o, keys = {}, {}
  for key, value in pairs(defaults) do o[key], keys[#keys + 1] = value, key end
  table.sort(keys)
  for i = 1, #arg do
    local key, value = arg[i]:match("^([%w_]+)=(%d+)$")
    if flags and flags[arg[i]] then
      flags[arg[i]](o)
    elseif key and o[key] then
      o[key] = tonumber(value)
    else
      local words = {}
      for word in pairs(flags or {}) do words[#words + 1] = word .. " or " end
      error(string.format("%s: expected %skey=number with a key of %s; got %s", script, table.concat(words),
                          table.concat(keys, ", "), arg[i]), 0)
    end
  end
  return o
end

function bench_options.median(list)
  table.sort(list)
  return list[math.floor((#list + 1) / 2)]
end

-- The seconds fn takes.
function bench_options.timed(fn)
  local start = accel.time()
  fn()
  return accel.time() - start
end

return bench_options
