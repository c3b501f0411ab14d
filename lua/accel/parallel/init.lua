-- accel.parallel: parallelism beyond data parallel over a device mesh
-- (acc.mesh, made from Accelerator{parallelism_config = ...}).
-- docs/api/parallelism.md says what exists and what does not yet.
local tp_parameters = require("accel.parallel.tp_parameters")

return {
  DeviceMesh = require("accel.parallel.device_mesh"),
  tensor_parallel = require("accel.parallel.tensor_parallel"),
  ColwiseLinear = require("accel.parallel.colwise_linear"),
  RowwiseLinear = require("accel.parallel.rowwise_linear"),
  VocabParallelEmbedding = require("accel.parallel.vocab_parallel_embedding"),
  vocab_parallel_cross_entropy = require("accel.parallel.vocab_parallel_cross_entropy"),
  -- full_state_dict(model, mesh): the unsplit model's weights, on every tp rank.
  full_state_dict = function(model, mesh) return tp_parameters.full_state_dict(model, mesh.tp) end,
}
