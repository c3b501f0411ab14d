-- The mesh's sizes from the launch (tests/launch/test_parallelism_options.sh):
-- accel.Accelerator{} gets them as its ParallelismConfig, and a recipe's
-- ParallelismConfig takes the launch's for each size it leaves out while the
-- sizes it gives win.
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")

local acc = accel.Accelerator{}
check.truthy(acc.mesh ~= nil, "the launch's sizes make a mesh")
local tp = acc.mesh.tp
check.equal(tp.size, tonumber(arg[1]), "the mesh's tp size")
check.equal(acc.mesh.dp.size, acc.num_processes / tp.size, "the mesh's dp size")
local summed = accel.tensor({ acc.process_index + 1 })
tp:all_reduce(summed)
local expected = 0
for _, r in ipairs(tp.ranks) do expected = expected + r + 1 end
check.near(summed, { expected }, 0, "an all_reduce over the tp group")

-- The recipe's sizes win; those it leaves out are the launch's.
local own = accel.ParallelismConfig{ dp_replicate_size = acc.num_processes, tp_size = 1 }
check.equal(own.tp_size, 1, "a tp_size the recipe gives")
check.equal(accel.ParallelismConfig{ dp_replicate_size = 1 }.tp_size, tp.size, "a tp_size the recipe leaves out")
check.equal(accel.Accelerator{ parallelism_config = own }.mesh.tp.size, 1, "the recipe's mesh")
acc:print(string.format("mesh from the launch: tp %d of ranks %s, dp %d", tp.size, table.concat(tp.ranks, ","),
                        acc.mesh.dp.size))
