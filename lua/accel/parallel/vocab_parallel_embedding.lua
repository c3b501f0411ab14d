-- A vocabulary-parallel embedding (Megatron-LM's VocabParallelEmbedding):
-- this rank holds the rows [r * V/tp, (r+1) * V/tp) of the table. Each rank
-- looks up the ids in its range, writes zeros for the others, and the tp
-- group's reduce_from sums the ranks' parts: every id is found on exactly
-- one rank. Ids count from the wrapped Embedding's index_base, and its
-- padding row, when this rank holds it, still gets no gradient. With
-- sequence_output (sequence parallelism) the parts are reduce-scattered over
-- the sequence instead: each rank keeps its part of the positions.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")
local tp_slice = require("accel.parallel.tp_slice")
local sequence_parallel = require("accel.parallel.sequence_parallel")

local VocabParallelEmbedding = Module:extend("VocabParallelEmbedding")

-- sequence_output: the model's sequence-parallel state (sequence_parallel.lua)
-- under sequence parallelism, else nil; each forward sets whether it splits.
function VocabParallelEmbedding:init(embedding, tp, name, sequence_output)
  if embedding.max_norm or embedding.scale_grad_by_freq then
    args.error("accel.parallel.tensor_parallel: " .. name .. " uses max_norm or scale_grad_by_freq, "
               .. "which a vocabulary-parallel embedding does not support")
  end
  self.weight = tp_slice.slice(embedding.weight, 1, tp, name .. ".weight")
  local rows = self.weight:size(1)
  self.num_embeddings, self.embedding_dim = rows * tp.size, self.weight:size(2)
  rawset(self, "tp", tp)
  rawset(self, "first", tp.rank * rows)  -- 0-based id of this rank's first row
  rawset(self, "index_base", embedding.index_base)
  rawset(self, "name", name)
  rawset(self, "sequence_output", sequence_output or false)
  -- 0-based row of the padding id within this rank's slice, if it holds it.
  local padding = embedding.padding_idx and embedding.padding_idx - 1 - self.first
  rawset(self, "local_padding", padding and padding >= 0 and padding < rows and padding or nil)
end

function VocabParallelEmbedding:forward(ids)
  local sp = self.sequence_output
  if sp then sp.split = sequence_parallel.splits(ids:size(sequence_parallel.DIM), self.tp, self.name) end
  local rows = self.weight:size(1)
  local zero_based = ids - self.index_base
  local mine = zero_based:ge(self.first):logical_and(zero_based:lt(self.first + rows))
  local local_ids = (zero_based - self.first):clamp(0, rows - 1)
  local vectors = core.functional.embedding(local_ids, self.weight, { index_base = 0, padding_idx = self.local_padding })
  local parts = vectors * mine:unsqueeze(-1):to(vectors.dtype)
  if sp and sp.split then
    return self.tp.group:reduce_scatter_sequence(parts, sequence_parallel.DIM)
  end
  return self.tp.group:reduce_from(parts)
end

function VocabParallelEmbedding:tp_split_dims()
  return { weight = 1 }
end

function VocabParallelEmbedding:__tostring()
  return string.format("VocabParallelEmbedding(%d of %d, %d, tp rank %d)", self.weight:size(1),
                       self.num_embeddings, self.embedding_dim, self.tp.rank)
end

return VocabParallelEmbedding
