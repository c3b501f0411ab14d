-- Which modules of a model a LoraConfig adapts and which it saves whole,
-- by PEFT's matching rules on the modules' full names
-- ("model.layers.0.self_attn.q_proj", as named_modules gives them):
--   target_modules, a list: a module matches when its full name is one of
--     the names or ends with "." .. name;
--   target_modules, a string: a Python regex the full name must match
--     whole (re.fullmatch, by PCRE2 under its match limits: a pattern that
--     backtracks without bound is an error naming it), or "all-linear": every nn.Linear
--     but the output layer (a causal LM's lm_head);
--   absent: PEFT's default for the model's config.model_type;
--   modules_to_save: a module matches when its full name ends with the
--     name (plain text, as PEFT compares them); a module inside one is
--     never adapted.
-- Each match is {parent = module, key = raw field key, path = full name,
-- module = the module}, in the model's order.
local Module = require("accel.nn.module")
local Linear = require("accel.nn.linear")
local args = require("accel.util.args")
local core = require("accel.core")

local targets = {}

-- PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING for the
-- architectures accel.models has (GPT-2's c_attn is a Conv1D, which
-- accel.peft does not adapt, so GPT-2 has none here).
local defaults = {
  llama = { "q_proj", "v_proj" },
  mistral = { "q_proj", "v_proj" },
  qwen2 = { "q_proj", "v_proj" },
  mixtral = { "q_proj", "v_proj" },
  bert = { "query", "value" },
}

-- Every submodule with its parent and the parent's raw key, once each, in definition order.
function targets.submodules(model)
  local out, seen = {}, { [model] = true }
  local function walk(m, prefix)
    for _, key in ipairs(m._fields) do
      local child = rawget(m, key)
      if Module.is_module(child) and not seen[child] then
        seen[child] = true
        local name = Module.field_name(m, key)
        local path = prefix == "" and name or (prefix .. "." .. name)
        out[#out + 1] = { parent = m, key = key, path = path, module = child }
        walk(child, path)
      end
    end
  end
  walk(model, "")
  return out
end

local function is_linear(m)
  local cls = getmetatable(m)
  while cls do
    if cls == Linear then return true end
    cls = cls.super
  end
  return false
end

local function ends_with(s, suffix)
  return suffix == "" or s:sub(-#suffix) == suffix
end

-- A function(name) -> whether `pattern` (a Python regex) matches the whole
-- name, as re.fullmatch; errors name `where` and the pattern.
function targets.pattern(pattern, where)
  local ok, compiled = pcall(core.tokenizers.python_pattern, pattern, where)
  if not ok then args.error(tostring(compiled):gsub("%s*%(called with:.*$", "")) end
  return function(name)
    local matched, result = pcall(compiled.fullmatch, compiled, name)
    if not matched then args.error(tostring(result):gsub("%s*%(called with:.*$", "")) end
    return result
  end
end

-- The target_modules to use and record for `model` (a list or a pattern),
-- and a function(path) -> whether it is targeted.
function targets.resolve(model, config, where)
  local spec = config.target_modules
  if spec == nil then
    local model_type = type(model.config) == "table" and model.config.model_type or nil
    spec = defaults[model_type]
    if not spec then
      args.error(string.format("%s: LoraConfig has no target_modules and accel.peft has no default for %s; give "
                               .. "target_modules (module names such as {\"q_proj\", \"v_proj\"}, or a pattern)",
                               where, model_type and ("model_type '" .. tostring(model_type) .. "'")
                                      or "a model without a config.model_type"))
    end
  elseif type(spec) == "string" and spec:lower() == "all-linear" then
    spec = {}
    local head = rawget(model, "lm_head")
    for _, s in ipairs(targets.submodules(model)) do
      if is_linear(s.module) and s.module ~= head then spec[#spec + 1] = s.path end
    end
  end
  if type(spec) == "string" then
    return spec, targets.pattern(spec, where .. ": target_modules")
  end
  local names = {}
  for i, name in ipairs(spec) do names[i] = name end
  return names, function(path)
    for _, name in ipairs(names) do
      if path == name or ends_with(path, "." .. name) then return true end
    end
    return false
  end
end

-- Whether `path` is, or is inside, a module named in modules_to_save (PEFT
-- keeps adapters off them).
local function inside_saved(path, modules_to_save)
  for _, name in ipairs(modules_to_save or {}) do
    local dotted = "." .. path .. "."
    if dotted:find("." .. name .. ".", 1, true) then return true end
  end
  return false
end

-- The modules_to_save matches; a name matching no module is an error naming it.
function targets.saved(model, config, where)
  local out = {}
  if not config.modules_to_save then return out end
  local found = {}
  for _, s in ipairs(targets.submodules(model)) do
    for _, name in ipairs(config.modules_to_save) do
      if ends_with(s.path, name) then
        out[#out + 1] = s
        found[name] = true
        break
      end
    end
  end
  for _, name in ipairs(config.modules_to_save) do
    if not found[name] then
      args.error(string.format("%s: modules_to_save: '%s' matches no module of the model", where, name))
    end
  end
  return out
end

-- The modules to adapt (spec and matches from resolve), every one an
-- nn.Linear. A target that is another kind of module, or a target_modules
-- that matches nothing, is an error naming target_modules.
function targets.adapted(model, config, spec, matches, where)
  local out, linear_names, seen_name = {}, {}, {}
  for _, s in ipairs(targets.submodules(model)) do
    if is_linear(s.module) then
      local last = s.path:match("([^.]+)$")
      if not seen_name[last] then
        seen_name[last] = true
        linear_names[#linear_names + 1] = last
      end
    end
    if matches(s.path) and not inside_saved(s.path, config.modules_to_save) then
      if not is_linear(s.module) then
        args.error(string.format("%s: target_modules matches '%s', a %s; accel.peft adds LoRA to nn.Linear "
                                 .. "layers only", where, s.path, s.module.__name))
      end
      out[#out + 1] = s
    end
  end
  if #out == 0 then
    args.error(string.format("%s: target_modules %s matches no module of the model (its nn.Linear layers are "
                             .. "named %s)%s", where,
                             type(spec) == "table" and ("{" .. table.concat(spec, ", ") .. "}")
                               or ("'" .. tostring(spec) .. "'"),
                             #linear_names > 0 and table.concat(linear_names, ", ") or "nothing: it has none",
                             type(spec) == "string" and "; a string is a regex the full name must match whole, "
                               .. "as '.*\\.q_proj'" or ""))
  end
  return out
end

return targets
