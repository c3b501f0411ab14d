-- Runs a port of one of Accelerate's test scripts as named sections, so a
-- run reports every section that fails rather than stopping at the first.
-- After each section every rank learns every rank's outcome (the ranks stay
-- in step and agree), and finish() raises when any section failed: a port
-- fails as a whole if any of its checks does.
--   local sections = dofile(dir .. "helpers/accelerate_sections.lua")(check, "test_accelerate_ops")
--   sections.run("gather", function() ... end)
--   sections.run("op_checker", fn, {unless = "needs --debug"})  -- reported as not run, never silent
--   sections.finish()
-- `accel-run T.lua -- gather,broadcast` runs only the sections named.
return function(check, name)
  local sections = { failed = {}, ran = 0 }
  local acc = accel.Accelerator{}
  local only
  if arg and arg[1] then
    only = {}
    for section in arg[1]:gmatch("[^,]+") do only[section] = true end
  end

  function sections.run(section, fn, options)
    if only and not only[section] then return end
    if options and options.unless then
      acc:print(string.format("%s: section %s not run: %s", name, section, options.unless))
      return
    end
    local ok, err = pcall(fn)
    local outcomes = acc:gather_object(ok and "" or tostring(err))
    -- Each distinct message once, with the ranks that raised it.
    local failed_on, ranks_of, messages = {}, {}, {}
    for r, message in ipairs(outcomes) do
      if message ~= "" then
        failed_on[#failed_on + 1] = r - 1
        if not ranks_of[message] then
          ranks_of[message] = {}
          messages[#messages + 1] = message
        end
        table.insert(ranks_of[message], r - 1)
      end
    end
    for _, message in ipairs(messages) do
      acc:print(string.format("%s: section %s: rank(s) %s: %s", name, section,
                              table.concat(ranks_of[message], ","), message))
    end
    sections.ran = sections.ran + 1
    if #failed_on > 0 then
      sections.failed[#sections.failed + 1] = section
      acc:print(string.format("%s: section %s failed on rank(s) %s", name, section, table.concat(failed_on, ",")))
    else
      acc:print(string.format("%s: section %s passed", name, section))
    end
  end

  function sections.finish()
    if #sections.failed > 0 then
      error(string.format("%s: %d of %d sections failed: %s", name, #sections.failed, sections.ran,
                          table.concat(sections.failed, ", ")), 0)
    end
    check.done(name)
  end

  return sections
end
