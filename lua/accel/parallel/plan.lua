-- A parallel plan: {module pattern = kind}, as the architectures carry
-- them (tp_plan, sp_plan, cp_plan). A pattern is a module's dotted name
-- with "*" for one part ("layers.*.mlp.up_proj"), matching the whole name
-- or a dotted suffix of it.
local sorted_keys = require("accel.util.sorted_keys")

local plan = {}

-- A function telling whether a module name matches `pattern`.
function plan.matcher(pattern)
  local body = pattern:gsub("[%^%$%(%)%%%.%[%]%+%-%?]", "%%%0"):gsub("%*", "[^.]+")
  local whole, suffix = "^" .. body .. "$", "%." .. body .. "$"
  return function(name) return name:find(whole) ~= nil or name:find(suffix) ~= nil end
end

-- fn(name, module, kind, pattern) for every module of `model` (in
-- named_modules order, the root left out) and every entry of `entries`
-- (in sorted order) whose pattern matches its name. Returns the set of
-- patterns that matched.
function plan.each_match(model, entries, fn)
  local patterns, matched = sorted_keys(entries), {}
  local matchers = {}
  for i, key in ipairs(patterns) do matchers[i] = plan.matcher(key) end
  for _, pair in ipairs(model:named_modules()) do
    for i, key in ipairs(patterns) do
      if pair[1] ~= "" and matchers[i](pair[1]) then
        matched[key] = true
        fn(pair[1], pair[2], entries[key], key)
      end
    end
  end
  return matched
end

-- The kinds' names, sorted, for messages.
function plan.kind_names(kinds)
  return table.concat(sorted_keys(kinds), ", ")
end

return plan
