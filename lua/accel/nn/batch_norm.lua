-- BatchNorm1d (input (N, C) or (N, C, L)) and BatchNorm2d (N, C, H, W):
--   nn.BatchNorm2d(num_features, {eps = 1e-5, momentum = 0.1, affine = true,
--                                 track_running_stats = true})
-- Training normalises with the batch's statistics and updates the running
-- ones (buffers running_mean, running_var, num_batches_tracked); eval uses
-- the running ones. momentum = false gives a cumulative average, as
-- PyTorch's momentum=None.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local F = core.functional

local batch_norm = {}

local function make(name, dims, layout)
  local cls = Module:extend(name)
  local where = "nn." .. name

  function cls:init(num_features, options)
    args.positive_integer(where, "num_features", num_features)
    local o = args.options(where, options, { eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true },
                           { eps = "number", momentum = "number|boolean", affine = "boolean",
                             track_running_stats = "boolean" })
    if o.momentum ~= false then args.probability(where, "momentum", o.momentum) end
    self.num_features, self.eps, self.momentum = num_features, o.eps, o.momentum
    self.affine, self.track_running_stats = o.affine, o.track_running_stats
    if o.affine then
      self.weight = core.ones(num_features, { requires_grad = true })
      self.bias = core.zeros(num_features, { requires_grad = true })
    end
    if o.track_running_stats then
      self:register_buffer("running_mean", core.zeros(num_features))
      self:register_buffer("running_var", core.ones(num_features))
      self:register_buffer("num_batches_tracked", core.tensor(0, { dtype = "int64" }))
    end
  end

  function cls:reset_running_stats()
    if self.track_running_stats then
      core.no_grad(function()
        self.running_mean:zero_()
        self.running_var:fill_(1)
        self.num_batches_tracked:zero_()
      end)
    end
  end

  function cls:forward(x)
    args.input_dims(where, x, dims, layout)
    local factor = self.momentum or 0
    if self.training and self.track_running_stats then
      local count = self.num_batches_tracked
      count:copy_(count + 1)
      if self.momentum == false then factor = 1 / self.num_batches_tracked:item() end
    end
    -- Without running stats the batch's statistics are used in eval mode too.
    local use_batch_stats = self.training or not self.track_running_stats
    return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                        { training = use_batch_stats, momentum = factor, eps = self.eps })
  end

  function cls:__tostring()
    return string.format("%s(%d, eps %g, momentum %s)", name, self.num_features, self.eps, tostring(self.momentum))
  end

  batch_norm[name] = cls
end

make("BatchNorm1d", { 2, 3 }, "(N, C) or (N, C, L)")
make("BatchNorm2d", { 4 }, "(N, C, H, W)")

return batch_norm
