-- acc:save_state(dir, {async = true}) and acc:wait_for_checkpoint()
-- (docs/live-runs.md). The save runs as a synchronous one does (the same
-- collectives, agreement, files, manifest entries and folder), except that
-- its four writing calls are staged instead: for the length of the save,
-- accel.core.formats's write_safetensors, write_text, write_manifest and
-- commit_folder hand their work to the Accelerator's background writer
-- (bindings/async_checkpoint_ops.cpp), which copies tensors to host memory
-- and computes each file's digest at once, and writes the files, then (on
-- the main process, once every rank's marker says its files are written)
-- the manifest and the rename, on its own thread. Training goes on
-- meanwhile; a crash before the rename leaves only a temporary folder, so
-- the last committed checkpoint stays the newest.
local core = require("accel.core")
local args = require("accel.util.args")
local checkpointing = require("accel.checkpointing")

local ck = core.formats
local async_save = {}

local STAGED = { "write_safetensors", "write_text", "write_manifest", "commit_folder" }

local function writer_of(acc)
  local writer = rawget(acc, "_checkpoint_writer")
  if not writer then
    writer = core.async_checkpoint.writer()
    acc._checkpoint_writer = writer
  end
  return writer
end

-- The share of one core the background writer may use (docs/live-runs.md):
-- all of one when training leaves a CPU free, a tenth when the threads of
-- this machine's ranks fill every CPU, since a writer at full speed then
-- takes a core from one of them and every parallel region waits for that
-- thread.
local FULL_CPUS_SHARE = 0.1

local function writer_share(given)
  if given == nil then
    local threads = core.get_num_threads() * core.dist.state().local_world_size
    return threads >= core.available_cpus() and FULL_CPUS_SHARE or 1
  end
  if type(given) ~= "number" or not (given > 0 and given <= 1) then
    args.error("Accelerator:save_state: writer_share must be a number in (0, 1], the share of a core the "
               .. "background writer may use; got " .. tostring(given))
  end
  return given
end

-- Waits until the save in flight is written and committed; raises on every
-- rank when it failed on any. Returns its folder (nil when none was in flight).
function async_save.wait_for_checkpoint(acc)
  local pending = rawget(acc, "_checkpoint_pending")
  if not pending then return nil end
  acc._checkpoint_pending = nil
  local ok, err = pcall(pending.writer.wait, pending.writer)
  local failed = core.tensor({ ok and 0 or 1 }, { dtype = "float32" })
  if acc.num_processes > 1 then core.dist.all_reduce(failed, "max") end
  if not ok then error(string.format("Accelerator:wait_for_checkpoint: '%s' was not written: %s", pending.folder, err), 0) end
  if failed:item() > 0 then
    error(string.format("Accelerator:wait_for_checkpoint: '%s' was not written: another rank failed", pending.folder), 0)
  end
  return pending.folder
end

function async_save.save_state(acc, dir, options)
  if type(options) ~= "table" then
    args.error("Accelerator:save_state: options must be a table ({async = true}), got a " .. type(options))
  end
  for key in pairs(options) do
    if key ~= "async" and key ~= "writer_share" then
      args.error("Accelerator:save_state: unknown option '" .. tostring(key) .. "'")
    end
  end
  if not options.async then
    if options.writer_share ~= nil then
      args.error("Accelerator:save_state: writer_share paces an asynchronous save; pass it with async = true")
    end
    return checkpointing.save_state(acc:_checkpoint_contents(), dir)
  end
  local share = writer_share(options.writer_share)
  async_save.wait_for_checkpoint(acc)  -- one save in flight
  local writer = writer_of(acc)
  local rank, world = acc.process_index, acc.num_processes
  local timeout_ms = math.floor(((core.launch or {}).timeout or 1800) * 1000)
  local originals = {}
  for _, name in ipairs(STAGED) do originals[name] = ck[name] end
  ck.write_safetensors = function(path, pairs) return writer:tensors(path, pairs) end
  ck.write_text = function(path, text) return writer:text(path, text) end
  ck.write_manifest = function(folder, manifest)
    writer:marker(folder, rank)
    writer:manifest(folder, manifest, world, timeout_ms)
  end
  ck.commit_folder = function(tmp, folder) writer:commit(tmp, folder) end
  local ok, folder = pcall(checkpointing.save_state, acc:_checkpoint_contents(), dir)
  for name, fn in pairs(originals) do ck[name] = fn end
  if not ok then
    pcall(writer.start, writer, 1)  -- what was staged is dropped with its temporary folder
    pcall(writer.wait, writer)
    error(folder, 0)
  end
  if not acc.is_main_process then writer:marker(ck.temporary_folder_for(folder), rank) end
  writer:start(share)
  acc._checkpoint_pending = { writer = writer, folder = folder }
  return folder
end

return async_save
