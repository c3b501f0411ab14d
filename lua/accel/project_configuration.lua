-- accel.ProjectConfiguration: where an Accelerator keeps what a run writes.
--   local acc = accel.Accelerator{ project_config = accel.ProjectConfiguration{
--     project_dir = "runs/x", automatic_checkpoint_naming = true, total_limit = 3 } }
-- With automatic_checkpoint_naming, acc:save_state() writes
-- project_dir/checkpoints/checkpoint_<iteration> (iteration counts saves
-- from 0) and keeps the newest total_limit of them; acc:load_state() picks
-- the newest complete one.
local args = require("accel.nn.args")

local ProjectConfiguration = {}
ProjectConfiguration.__index = ProjectConfiguration

local where = "accel.ProjectConfiguration"

local function new(_, options)
  local o = args.options(where, options, {
    project_dir = args.NONE,
    automatic_checkpoint_naming = false,
    total_limit = args.NONE,
    iteration = 0,
  })
  if o.project_dir ~= nil and type(o.project_dir) ~= "string" then
    args.error(string.format("%s: project_dir must be a string, got a %s", where, type(o.project_dir)))
  end
  if type(o.automatic_checkpoint_naming) ~= "boolean" then
    args.error(string.format("%s: automatic_checkpoint_naming must be a boolean, got %s", where,
                             tostring(o.automatic_checkpoint_naming)))
  end
  if o.automatic_checkpoint_naming and not o.project_dir then
    args.error(where .. ": automatic_checkpoint_naming needs a project_dir")
  end
  if o.total_limit ~= nil then args.positive_integer(where, "total_limit", o.total_limit) end
  if type(o.iteration) ~= "number" or o.iteration < 0 or o.iteration % 1 ~= 0 then
    args.error(string.format("%s: iteration must be an integer >= 0, got %s", where, tostring(o.iteration)))
  end
  return setmetatable(o, ProjectConfiguration)
end

function ProjectConfiguration.is(value)
  return getmetatable(value) == ProjectConfiguration
end

-- The folder automatic checkpoint names live in.
function ProjectConfiguration:checkpoints_dir()
  return self.project_dir .. "/checkpoints"
end

return setmetatable(ProjectConfiguration, { __call = new })
