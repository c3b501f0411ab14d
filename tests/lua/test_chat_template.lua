-- tok:apply_chat_template without the oracle (tests/tokenizers/
-- test_chat_template_parity.sh compares with transformers): where a folder's
-- template comes from (tokenizer_config.json's string or named list,
-- chat_template.json, chat_template.jinja with additional_chat_templates/),
-- tok.chat_template set and written back by save_pretrained, named
-- templates chosen by name, tools or default, extra variables, batches and
-- tensors, and errors naming the template's file and line.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local core = require("accel.core")
local tokenizers = accel.tokenizers

local fixture = arg[0]:match("(.*/)") .. "../tokenizers/fixtures/byte_level"
local work = os.tmpname()
os.remove(work)
core.formats.make_empty_folder(work)

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  return text
end

-- A folder of the fixture tokenizer with `config` as tokenizer_config.json and `files` beside it.
local function folder(name, config, files)
  local dir = work .. "/" .. name
  core.formats.make_empty_folder(dir)
  write(dir .. "/tokenizer.json", read(fixture .. "/tokenizer.json"))
  write(dir .. "/tokenizer_config.json", core.json.encode(config))
  for file, text in pairs(files or {}) do
    if file:find("/") then os.execute("mkdir -p '" .. dir .. "/" .. file:match("^(.*)/") .. "'") end
    write(dir .. "/" .. file, text)
  end
  return dir
end

local chat = { { role = "user", content = "Hi" }, { role = "assistant", content = "Hello" } }
local role_list = "{% for m in messages %}{{ m.role }};{% endfor %}"

-- tokenizer_config.json's string
local tok = tokenizers.from_pretrained(folder("config", { eos_token = "<|endoftext|>", chat_template = role_list }))
check.equal(tok.chat_template, role_list, "the config's chat_template")
check.equal(tok:apply_chat_template(chat, { tokenize = false }), "user;assistant;", "rendered")
check.equal(tok:apply_chat_template(chat, { tokenize = false, chat_template = "{{ eos_token }}{{ x }}", x = 7 }),
            "<|endoftext|>7", "a template given as text sees the special tokens and extra variables")
local out = tok:apply_chat_template(chat)
local ids = tok:encode("user;assistant;", { add_special_tokens = false })
check.equal(table.concat(out.input_ids, ","), table.concat(ids, ","), "the ids are encode's, no special tokens added")
check.equal(#out.attention_mask, #ids, "an attention mask per id")
check.equal(#tok:apply_chat_template(chat, { return_dict = false }), #ids, "return_dict = false gives the ids")
local batch = tok:apply_chat_template({ chat, chat }, { return_tensors = "pt" })
check.equal(batch.input_ids:size(1), 2, "a batch of conversations gives a row each")
check.equal(batch.input_ids.dtype, "int64", "as int64 tensors")
tok.chat_template = "{{ messages | length }}"
check.equal(tok:apply_chat_template(chat, { tokenize = false }), "2", "tok.chat_template is settable")

-- a named list in the config: default, tool_use when tools are given, or by name
local named = { { name = "default", template = "default" }, { name = "tool_use", template = "tools:{{ tools | length }}" },
                { name = "other", template = "other" } }
tok = tokenizers.from_pretrained(folder("named", { chat_template = named }))
check.equal(tok:apply_chat_template(chat, { tokenize = false }), "default", "named: default")
check.equal(tok:apply_chat_template(chat, { tokenize = false, tools = { { type = "function" } } }), "tools:1",
            "named: tool_use with tools")
check.equal(tok:apply_chat_template(chat, { tokenize = false, chat_template = "other" }), "other", "named: by name")
local saved = work .. "/saved"
tok:save_pretrained(saved)
check.equal(read(saved .. "/chat_template.jinja"), "default", "save_pretrained writes the default as chat_template.jinja")
check.equal(read(saved .. "/additional_chat_templates/tool_use.jinja"), "tools:{{ tools | length }}",
            "and the others in additional_chat_templates/")
check.equal(core.json.read(saved .. "/tokenizer_config.json").chat_template, nil, "none in the config")
local back = tokenizers.from_pretrained(saved)
check.equal(back.chat_template.other, "other", "read back by name")
check.equal(back:apply_chat_template(chat, { tokenize = false }), "default", "read back: default")
tok.chat_template = { ["../escape"] = "x" }
check.raises(function() tok:save_pretrained(work .. "/bad") end, "a name that leaves the folder",
             "not a plain file name")

-- chat_template.json, and chat_template.jinja over the config
tok = tokenizers.from_pretrained(folder("json", {}, { ["chat_template.json"] = core.json.encode({ chat_template = "json" }) }))
check.equal(tok:apply_chat_template(chat, { tokenize = false }), "json", "chat_template.json")
local dir = folder("jinja", { chat_template = "config" }, { ["chat_template.jinja"] = "jinja\n" })
tok = tokenizers.from_pretrained(dir)
check.equal(tok:apply_chat_template(chat, { tokenize = false }), "jinja", "chat_template.jinja wins over the config")
tok:save_pretrained(work .. "/jinja_saved")
check.equal(read(work .. "/jinja_saved/chat_template.jinja"), "jinja\n", "and is written back as it was")

-- errors
write(dir .. "/chat_template.jinja", "line one\n{{ messages[0].nothing.deeper }}")
tok = tokenizers.from_pretrained(dir)
check.raises(function() tok:apply_chat_template(chat) end, "an error names the file and line",
             dir .. "/chat_template.jinja", "line 2")
check.raises(function() tok:apply_chat_template(chat, { chat_template = "{% if %}" }) end, "a template that does not parse",
             "chat template, line 1")
check.raises(function() tok:apply_chat_template(chat, { chat_template = "{{ raise_exception('no system role') }}" }) end,
             "raise_exception", "no system role")
tok = tokenizers.from_pretrained(folder("none", {}))
check.raises(function() tok:apply_chat_template(chat) end, "no template", "has no chat template")
tok.chat_template = role_list
check.raises(function() tok:apply_chat_template(chat, { tokenize = false, return_assistant_tokens_mask = true }) end,
             "masks need ids", "return_assistant_tokens_mask")
check.raises(function() tok:apply_chat_template(chat, { add_generation_prompt = true, continue_final_message = true }) end,
             "continue and generation prompt", "continue_final_message")
check.raises(function() tok:apply_chat_template(chat, { continue_final_message = true }) end,
             "continue_final_message with a template that never reads the field", "never names it")
check.raises(function()
  tok:apply_chat_template(chat, { continue_final_message = true, chat_template = "{{ messages[-1].content[:2] }}" })
end, "a template that cuts the final message", "does not appear")
check.equal(tok:apply_chat_template(chat, { tokenize = false, continue_final_message = true,
                                            chat_template = "<{{ messages[-1].content | trim }}>" }), "<Hello",
            "continue_final_message leaves the final message open")
check.raises(function() tok:apply_chat_template({ { role = "user", content = "\xff" } }) end, "text that is not UTF-8",
             "UTF-8")
check.raises(function() tok:apply_chat_template(chat, { chat_template = "{{ x }}", x = print }) end,
             "a function as a variable", "variables.x")
check.raises(function()
  tok:apply_chat_template(chat, { chat_template = "{% for i in range(100) %}x{% endfor %}", template_limits = { max_steps = 50 } })
end, "template_limits bound the render", "limit of 50 steps")
check.raises(function() tok:apply_chat_template(chat, { template_limits = { max_step = 50 } }) end,
             "template_limits' keys are checked", "unknown option 'max_step'")
check.done("test_chat_template")
