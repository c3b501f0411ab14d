-- nproc: 4
-- SHARDED_STATE_DICT checkpoints loaded on another device mesh read, on each
-- rank, only what it keeps (lua/accel/parallel/checkpoint/reshard.lua), one tensor at a
-- time, never the whole model. A Llama of 3.4M parameters (13.6 MB; with
-- AdamW's two slots 41 MB of state) trains 2 steps on one mesh and saves
-- its flat shards or tp slices; a run on another mesh, built from other
-- weights, loads them:
--   TP 2 x FSDP 2 -> FSDP 4 (tp 2 -> 1, shards of a slice -> shards of the whole),
--   TP 2 x FSDP 2 -> no mesh (4 plain data-parallel ranks, each the whole model),
--   TP 2 x FSDP 2 -> FSDP over the 4 ranks without a mesh,
--   FSDP 4 -> TP 2 x FSDP 2 (tp 1 -> 2),
--   TP 2 x dp_replicate 2 (tp slices, no FSDP) -> FSDP 4.
-- Each load is exact: the run saves again with FULL_STATE_DICT, and its
-- model.safetensors and optimizer.safetensors (the unsplit model and
-- optimizer state, exp_avg, exp_avg_sq, step and the groups' options)
-- equal, bit for bit, those of the same checkpoint loaded on the mesh it was
-- saved on (each rank its own files) and saved the same way.
-- Memory, from the engine's allocator (accel.cpu_memory_stats: bytes of
-- live tensors over 1 KiB): what a rank holds at the peak of load_state
-- beyond what it keeps once loaded (its new optimizer state) stays within
-- its share of the model and optimizer state (what the load hands over to
-- the model and the optimizer) plus the largest parameter and 6 MiB; the
-- figures are printed. Making the full state on every rank, as loads did
-- before, takes at least the whole model and optimizer state (41 MB) on
-- every rank, past each of these bounds (14 MB on 4 ranks, 45 MB for the
-- whole model on a rank).
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local ck = require("accel.core").formats
local F = accel.nn.functional

local CONFIG = { model_type = "llama", vocab_size = 512, hidden_size = 256, intermediate_size = 768,
                 num_hidden_layers = 4, num_attention_heads = 4, num_key_value_heads = 2 }
local ROWS, T = 4, 8
local MARGIN = 6 * 2 ^ 20

local acc0 = accel.Accelerator{}
local rank = acc0.process_index
local work = acc0:gather_object(string.format("%s/mesh_reshard_%d_%d", os.getenv("ACCEL_TEST_TMPDIR") or "/tmp",
                                              os.time(), math.random(1e9)))[1]

-- The full model's parameters: their bytes, and the largest one's.
local full_bytes, largest = 0, 0
do
  accel.set_seed(1)
  for _, p in pairs(accel.models.from_config(CONFIG):state_dict()) do
    full_bytes = full_bytes + p:numel() * 4
    largest = math.max(largest, p:numel() * 4)
  end
end

-- A prepared run on `sizes` ({tp, dp_shard, dp_replicate}; nil: no mesh;
-- "FSDP": FSDP over the world, without a mesh), its model built from `seed`.
local function setup(sizes, kind, seed)
  local options = {}
  if sizes == "FSDP" then
    sizes, options.fsdp_plugin = nil, accel.FullyShardedDataParallelPlugin{ state_dict_type = kind,
                                                                          transformer_layer_cls = "LlamaDecoderLayer" }
  elseif sizes then
    options.parallelism_config = accel.ParallelismConfig{ tp_size = sizes.tp, dp_shard_size = sizes.dp_shard,
                                                          dp_replicate_size = sizes.dp_replicate }
    options.fsdp_plugin = accel.FullyShardedDataParallelPlugin{ state_dict_type = kind,
      transformer_layer_cls = (sizes.dp_shard or 1) > 1 and "LlamaDecoderLayer" or nil }
  end
  local acc = accel.Accelerator(options)
  accel.set_seed(seed)
  local model = accel.models.from_config(CONFIG):train()
  if sizes and sizes.tp then model = accel.parallel.tensor_parallel(model, acc.mesh) end
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3, weight_decay = 0.01 })
  model, opt = acc:prepare(model, opt)
  return { acc = acc, model = model, opt = opt }
end

-- Two AdamW steps on random tokens (each dp rank its own rows).
local function train(run)
  for step = 1, 2 do
    accel.set_seed(100 + step * 10 + (run.acc.mesh and run.acc.mesh.dp.rank or run.acc.process_index))
    local rows = accel.randint(0, CONFIG.vocab_size, { ROWS, T + 1 })
    local logits = run.model{ input_ids = rows:narrow(2, 1, T) }.logits
    run.acc:backward(F.cross_entropy(logits:reshape(-1, CONFIG.vocab_size), rows:narrow(2, 2, T):reshape(-1) + 1))
    run.opt:step()
    run.opt:zero_grad()
  end
end

local function tensors(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  f:close()
  return ck.read_safetensors(path)
end

-- Every tensor of two FULL_STATE_DICT checkpoints' model and optimizer files equal.
local function same_full(dir, expected_dir, what)
  for _, name in ipairs({ "model.safetensors", "optimizer.safetensors" }) do
    local got, expected = tensors(dir .. "/" .. name), tensors(expected_dir .. "/" .. name)
    check.truthy(got ~= nil and expected ~= nil, what .. ": both hold " .. name)
    local count = 0
    for key, t in pairs(expected) do
      count = count + 1
      local g = got[key]
      check.truthy(g ~= nil and table.concat(g:size(), "x") == table.concat(t:size(), "x")
                   and (g:double() - t:double()):abs():max():item() == 0,
                   string.format("%s: %s '%s' equal", what, name, key))
    end
    for key in pairs(got) do
      check.truthy(expected[key] ~= nil, string.format("%s: %s '%s' expected", what, name, key))
    end
    check.truthy(count > 10, what .. ": " .. name .. " holds the state")
  end
end

-- The allocator's live bytes with nothing unreachable left. LuaJIT's
-- compiled traces hold the objects they were specialised on (a module, its
-- tensors) as constants, so an earlier run's model stayed alive, on some
-- ranks and not others as the traces fell, until a trace was dropped during
-- a load (kept < 0, and a peak that much higher): the traces are flushed
-- first, then collections run until they free nothing more.
local function settled_bytes()
  jit.flush()
  local bytes = math.huge
  for _ = 1, 20 do
    collectgarbage()
    local now = accel.cpu_memory_stats().allocated_bytes
    if now >= bytes then return now end
    bytes = now
  end
  return bytes
end

-- load_state on `run`, measured: the allocator's live bytes before, at the
-- peak and after (each once collections free nothing more).
local function measured_load(run, dir)
  local before = settled_bytes()
  accel.reset_peak_cpu_memory_stats()
  run.acc:load_state(dir)
  local peak = accel.cpu_memory_stats().peak_allocated_bytes
  local after = settled_bytes()
  return { peak_over_kept = peak - after, kept = after - before }
end

-- `dir`, a SHARDED checkpoint saved on `from`, loaded on `to` exactly as
-- on `from` itself (`reference`: that load saved with FULL_STATE_DICT), and
-- within the memory bound; `share` is the fraction of the model a rank
-- holds on `to`.
local function check_load(dir, reference, to, share, what)
  local run = setup(to, "FULL_STATE_DICT", 9)
  local m = measured_load(run, dir)
  local bound = 3 * full_bytes * share + largest + MARGIN
  local ok = m.peak_over_kept <= bound
  local line = string.format(
    "%s: rank %d's tensors peaked %.1f MB above their level before the load, %.1f MB beyond the %.1f MB it kept "
      .. "(bound %.1f MB: its share %.1f MB + the largest parameter %.1f MB + %.1f MB; the whole model and optimizer "
      .. "state %.1f MB)", what, rank, (m.peak_over_kept + m.kept) / 1e6, m.peak_over_kept / 1e6, m.kept / 1e6,
    bound / 1e6, 3 * full_bytes * share / 1e6, largest / 1e6, MARGIN / 1e6, 3 * full_bytes / 1e6)
  print(line)
  check.truthy(ok, line)
  run.acc:save_state(dir .. "_on_" .. what:gsub("[^%w]+", "_"))
  same_full(dir .. "_on_" .. what:gsub("[^%w]+", "_"), reference, what)
  run.acc:free_memory()
end

-- Saves a SHARDED checkpoint on `sizes` after 2 steps, and the reference:
-- it loaded on the same mesh (its own files) and saved FULL.
local function saved_on(sizes, name)
  local a = setup(sizes, "SHARDED_STATE_DICT", 1)
  train(a)
  a.acc:save_state(work .. "/" .. name)
  a.acc:free_memory()
  local own = setup(sizes, "FULL_STATE_DICT", 9)
  own.acc:load_state(work .. "/" .. name)
  own.acc:save_state(work .. "/" .. name .. "_full")
  own.acc:free_memory()
  return work .. "/" .. name, work .. "/" .. name .. "_full"
end

local tp_fsdp, tp_fsdp_full = saved_on({ tp = 2, dp_shard = 2 }, "tp2_fsdp2")
check_load(tp_fsdp, tp_fsdp_full, { dp_shard = 4 }, 1 / 4, "TP 2 x FSDP 2 on FSDP 4")
check_load(tp_fsdp, tp_fsdp_full, nil, 1, "TP 2 x FSDP 2 without a mesh")
check_load(tp_fsdp, tp_fsdp_full, "FSDP", 1 / 4, "TP 2 x FSDP 2 on FSDP 4 without a mesh")
local fsdp, fsdp_full = saved_on({ dp_shard = 4 }, "fsdp4")
check_load(fsdp, fsdp_full, { tp = 2, dp_shard = 2 }, 1 / 4, "FSDP 4 on TP 2 x FSDP 2")
local tp, tp_full = saved_on({ tp = 2, dp_replicate = 2 }, "tp2")
check_load(tp, tp_full, { dp_shard = 4 }, 1 / 4, "TP 2 x dp_replicate 2 on FSDP 4")

-- A saved file altered after the save fails the load on the ranks that read
-- it, naming it, before anything changes.
acc0:wait_for_everyone()
if rank == 0 then
  local f = assert(io.open(tp_fsdp .. "/model_rank_1.safetensors", "r+b"))
  local size = f:seek("end")
  f:seek("set", size - 9)
  local byte = f:read(1)
  f:seek("set", size - 9)
  f:write(string.char((byte:byte() + 1) % 256))
  f:close()
end
acc0:wait_for_everyone()
local run = setup({ dp_shard = 4 }, "FULL_STATE_DICT", 9)
check.raises(function() run.acc:load_state(tp_fsdp) end, "an altered shard",
             "model_rank_1.safetensors' fails its checksum")
run.acc:free_memory()

acc0:wait_for_everyone()
if rank == 0 then ck.remove_folder(work) end
check.done("test_mesh_reshard_4ranks")
