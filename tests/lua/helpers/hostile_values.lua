-- Value files nobody should trust: each must be refused with a clear error
-- and never run. Payloads that would run leave `marker` behind, exit the
-- process, or return a number that no data-only reader could produce.
-- hostile(marker) -> list of {what, bytes, words the error must contain}.
local varint = require("accel.serialize").varint

return function(marker)
  local magic = "accel-value 1\n"
  local write_marker = string.format("(function() io.open(%q, 'w'):close() os.exit(3) end)()", marker)
  return {
    { "LuaJIT bytecode", string.dump(function() return 6 * 7 end), { "not an accel value file" } },
    { "text that returns bytecode", "return " .. string.dump(function() return 6 * 7 end), { "not an accel value file" } },
    { "a loop", "while true do end", { "not an accel value file" } },
    { "a call to os.exit", "return os.exit(3)", { "not an accel value file" } },
    { "code that writes a file", "return " .. write_marker, { "not an accel value file" } },
    { "code that computes", "return (function() local n = 0 for i = 1, 10 do n = n + i end return n end)()",
      { "not an accel value file" } },
    { "a table constructor", "return {[1]=1,}", { "not an accel value file" } },
    { "tables 1000 deep", magic .. ("{" .. varint(1) .. "t"):rep(1000) .. "t", { "nested more than 100 deep" } },
    { "a table claiming 2^40 entries", magic .. "{" .. varint(2 ^ 40), { "1099511627776 entries", "remain" } },
    { "a string claiming 2^50 bytes", magic .. "s" .. varint(2 ^ 50) .. "abc", { "a string needs", "remain" } },
    { "a tensor claiming 2^20 x 2^20 elements",
      magic .. "T" .. varint(7) .. "float64" .. varint(2) .. varint(2 ^ 20) .. varint(2 ^ 20), { "elements", "remain" } },
    { "a tensor of an unknown dtype", magic .. "T" .. varint(6) .. "object" .. varint(0), { "unknown tensor dtype" } },
    { "an unknown tag", magic .. "F", { "unknown value tag" } },
    { "bytes after the value", magic .. "tt", { "unexpected byte(s) after the value" } },
    { "a table key given twice", magic .. "{" .. varint(2) .. "tttf", { "key true twice" } },
    { "a nil key", magic .. "{" .. varint(1) .. "nt", { "key that is nil" } },
  }
end
