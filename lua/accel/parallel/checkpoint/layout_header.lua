-- The head of a pipeline's or an ep checkpoint's mesh_layout.lua, checked
-- (pipeline_checkpoint.lua, expert_checkpoint.lua): a `mesh` table with a
-- positive count for each of `sizes`, a `world_size` equal to the one the
-- checkpoint's manifest says it was saved on, and the `part` table (the
-- layout's own: "pipeline", "experts"). Errors name `where` and the field.
local field_checks = require("accel.util.field_checks")

return function(saved, where, part, sizes, world_size)
  field_checks.check(saved, { { "mesh", "table" }, { "world_size", "positive count" }, { part, "table" } }, where)
  if saved.world_size ~= world_size then
    error(string.format("%s says world_size %d but the checkpoint was saved on %d process(es)", where,
                        saved.world_size, world_size), 0)
  end
  for _, dim in ipairs(sizes) do field_checks.check(saved.mesh, { { dim, "positive count" } }, where .. " (mesh)") end
end
