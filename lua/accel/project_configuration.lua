-- accel.ProjectConfiguration: where an Accelerator keeps what a run writes.
--   local acc = accel.Accelerator{ project_config = accel.ProjectConfiguration{
--     project_dir = "runs/x", automatic_checkpoint_naming = true, total_limit = 3 } }
-- With automatic_checkpoint_naming, acc:save_state() writes
-- project_dir/checkpoints/checkpoint_<iteration> (iteration counts saves
-- from 0) and keeps the newest total_limit of them; acc:load_state() picks
-- the newest complete one. project_dir may be left out when the
-- Accelerator is given one, as in Accelerate:
--   accel.Accelerator{ project_dir = "runs/x",
--     project_config = accel.ProjectConfiguration{ automatic_checkpoint_naming = true } }
-- (the configuration's own project_dir, when it has one, is the one used).
-- Without either, the configuration is valid until a save_state or
-- load_state needs the folder, which is then an error saying so.
local args = require("accel.util.args")

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
  if o.total_limit ~= nil then args.positive_integer(where, "total_limit", o.total_limit) end
  if type(o.iteration) ~= "number" or o.iteration < 0 or o.iteration % 1 ~= 0 then
    args.error(string.format("%s: iteration must be an integer >= 0, got %s", where, tostring(o.iteration)))
  end
  return setmetatable(o, ProjectConfiguration)
end

function ProjectConfiguration.is(value)
  return getmetatable(value) == ProjectConfiguration
end

-- Gives the configuration a project_dir when it has none (the
-- Accelerator's, as Accelerate's set_directories).
function ProjectConfiguration:set_directories(project_dir)
  if type(project_dir) ~= "string" then
    args.error(string.format("%s: project_dir must be a string, got a %s", where, type(project_dir)))
  end
  self.project_dir = project_dir
end

-- The folder automatic checkpoint names live in; an error naming `caller`
-- (the function that needs it) when there is no project_dir.
function ProjectConfiguration:checkpoints_dir(caller)
  if not self.project_dir then
    args.error((caller and (caller .. ": ") or "")
               .. "automatic checkpoint naming needs a project folder, and neither accel.Accelerator{project_dir = ...} "
               .. "nor accel.ProjectConfiguration{project_dir = ...} gave one")
  end
  return self.project_dir .. "/checkpoints"
end

return setmetatable(ProjectConfiguration, { __call = new })
