-- accel.parallel: parallelism beyond data parallel over a device mesh
-- (acc.mesh, made from Accelerator{parallelism_config = ...}).
-- docs/api/parallelism.md says what exists and what does not yet.
local tp_parameters = require("accel.parallel.tp_parameters")
local context_parallel = require("accel.parallel.context_parallel")
local context_parallel_layout = require("accel.parallel.context_parallel_layout")

return {
  DeviceMesh = require("accel.parallel.device_mesh"),
  tensor_parallel = require("accel.parallel.tensor_parallel"),
  ColwiseLinear = require("accel.parallel.colwise_linear"),
  RowwiseLinear = require("accel.parallel.rowwise_linear"),
  VocabParallelEmbedding = require("accel.parallel.vocab_parallel_embedding"),
  vocab_parallel_cross_entropy = require("accel.parallel.vocab_parallel_cross_entropy"),
  -- full_state_dict(model, mesh): the unsplit model's weights, on every tp rank.
  full_state_dict = function(model, mesh) return tp_parameters.full_state_dict(model, mesh.tp) end,
  -- Context parallelism over the mesh's cp dim (context_parallel.lua): the model's attention over
  -- the ring; a batch's load-balanced split, one tensor's part and the inverse; the loss of a split
  -- sequence.
  context_parallel = context_parallel.apply,
  context_parallel_split = context_parallel_layout.split,
  context_parallel_part = context_parallel_layout.part,
  context_parallel_gather = context_parallel_layout.gather,
  context_parallel_loss = context_parallel.loss,
  -- Expert parallelism over the mesh's ep dim (expert_parallel.lua): each rank keeps its share of
  -- every mixture's experts, tokens exchanged with an all-to-all.
  expert_parallel = require("accel.parallel.expert_parallel"),
}
