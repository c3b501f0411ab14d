-- nproc: 2
-- Accelerate's spelling of a project: Accelerator{project_dir = d,
-- project_config = ProjectConfiguration{automatic_checkpoint_naming = true}}.
-- The configuration's project_dir defaults to the Accelerator's; save_state()
-- writes d/checkpoints/checkpoint_<n>; without a project folder anywhere
-- the configuration is valid until save_state needs the folder, which is
-- then a clear error.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim = accel.nn, accel.optim
local ck = require("accel.core").formats

local root = "/tmp/accel_test_project_dir_" .. (os.getenv("MASTER_PORT") or "1")
local dir = root .. "/run"

local acc = accel.Accelerator{
  project_dir = dir,
  project_config = accel.ProjectConfiguration{ automatic_checkpoint_naming = true, total_limit = 2 },
}
check.equal(acc.project_dir, dir, "acc.project_dir")
check.equal(acc.project_configuration.project_dir, dir, "the configuration's project_dir is the Accelerator's")
accel.set_seed(2)
local model = nn.Linear(3, 1)
local opt = optim.SGD(model:parameters(), { lr = 0.1 })
model, opt = acc:prepare(model, opt)

local saved = {}
for i = 1, 3 do
  acc:backward(nn.functional.mse_loss(model(accel.ones(2, 3)), accel.zeros(2, 1)))
  opt:step(); opt:zero_grad()
  saved[i] = acc:save_state()
  check.equal(saved[i], dir .. "/checkpoints/checkpoint_" .. (i - 1), "save " .. i .. " goes to the automatic folder")
end
acc:wait_for_everyone()
check.equal(table.concat(ck.list_folder(dir .. "/checkpoints"), " "), "checkpoint_1 checkpoint_2",
            "the newest total_limit checkpoints are kept")
local weight = model.weight:clone()
accel.no_grad(function() model.weight:fill_(0) end)
check.equal(acc:load_state(), saved[3], "load_state() takes the newest automatic checkpoint")
check.near(model.weight, weight, 0, "the weights are back")

-- The configuration's own project_dir wins over the Accelerator's.
local own = accel.Accelerator{
  project_dir = root .. "/ignored",
  project_config = accel.ProjectConfiguration{ project_dir = root .. "/own", automatic_checkpoint_naming = true },
}
check.equal(own.project_dir, root .. "/own", "project_config's project_dir wins")

-- project_dir alone: a field, no automatic naming.
local plain = accel.Accelerator{ project_dir = root .. "/plain" }
check.equal(plain.project_dir, root .. "/plain", "project_dir without project_config")
check.raises(function() plain:save_state() end, "save_state without a folder nor automatic naming",
             "Accelerator:save_state: give a folder")

-- No project folder anywhere: valid until save_state needs one.
local nowhere = accel.Accelerator{ project_config = accel.ProjectConfiguration{ automatic_checkpoint_naming = true } }
check.equal(nowhere.project_dir, nil, "no project_dir")
local err = check.raises(function() nowhere:save_state() end, "save_state with no project folder",
                         "Accelerator:save_state: automatic checkpoint naming needs a project folder", "Accelerator{project_dir = ...}",
                         "ProjectConfiguration{project_dir = ...}")
check.truthy(err:find("test_project_dir.lua:", 1, true), "the error points at the recipe line: " .. err)
check.raises(function() nowhere:load_state() end, "load_state with no project folder", "Accelerator:load_state:",
             "automatic checkpoint naming needs a project folder")

check.raises(function() accel.Accelerator{ project_dir = 3 } end, "a project_dir of the wrong type",
             "accel.Accelerator: project_dir must be a string")

acc:wait_for_everyone()
if acc.is_main_process then ck.remove_folder(root) end
check.done("test_project_dir")
