-- The accel module: tensors from the native core, plus nn, optim, data and
-- the Accelerator. Recipes get it as the global `accel` or via require.
local core = require("accel.core")

local accel = {}

for name, fn in pairs(core) do
  if type(fn) == "function" then accel[name] = fn end
end

-- dtypes are their names (engine/tensor_description.h); t.dtype compares equal to them.
for _, name in ipairs(core.dtype_names()) do accel[name] = name end
accel.float, accel.double, accel.half, accel.long = "float32", "float64", "float16", "int64"

-- Torch7's typed constructors: the way to ask for integers, since a table of
-- numbers is always the default float dtype (accel.LongTensor{1, 2, 3}). They
-- take accel.tensor's options but the dtype, which their name fixes.
local args = require("accel.util.args")
for name, dtype in pairs({ LongTensor = "int64", IntTensor = "int32", ByteTensor = "uint8",
                           BoolTensor = "bool", FloatTensor = "float32", DoubleTensor = "float64" }) do
  local where = "accel." .. name
  accel[name] = function(data, options)
    local o = args.options(where, options, { device = args.NONE, requires_grad = args.NONE })
    o.dtype = dtype
    return core.tensor(data, o)
  end
end

local random = require("accel.util.random")

-- The seed (random.lua) and the generator states, as torch.get_rng_state / set_rng_state; the same for
-- math.random; and rank 0's states copied to every rank.
accel.set_seed = random.set_seed
accel.initial_seed = random.initial_seed
accel.get_rng_state = random.get
accel.set_rng_state = random.set
accel.get_math_random_state = random.get_math_random
accel.set_math_random_state = random.set_math_random
function accel.synchronize_rng_states()
  local s = core.dist.state()
  if s.world_size > 1 then core.dist.init() end
  random.synchronize({ rank = s.rank, size = s.world_size })
end

accel.cuda = core.cuda
accel.checkpoint = require("accel.nn.activation_checkpoint")
accel.nn = require("accel.nn")
accel.optim = require("accel.optim")
accel.data = require("accel.data")
accel.PartialState = require("accel.partial_state")
accel.GradientAccumulationPlugin = require("accel.gradient_accumulation_plugin")
accel.FullyShardedDataParallelPlugin = require("accel.parallel.fsdp.fsdp_plugin")
accel.DeepSpeedPlugin = require("accel.parallel.fsdp.deepspeed_plugin")
accel.MixedPrecisionPolicy = require("accel.parallel.fsdp.mixed_precision_policy")
accel.ParallelismConfig = require("accel.parallel.parallelism_config")
accel.Accelerator = require("accel.accelerator")
accel.ProjectConfiguration = require("accel.project_configuration")
accel.find_executable_batch_size = require("accel.batch_size_finder")
accel.logging = require("accel.logging")
accel.get_logger = accel.logging.get_logger
accel.progress = require("accel.progress")
accel.init_empty_weights = require("accel.big_modeling.init_empty_weights")
accel.compute_module_sizes = require("accel.big_modeling.module_sizes").compute
accel.infer_auto_device_map = require("accel.big_modeling.infer_auto_device_map")
accel.load_checkpoint_and_dispatch = require("accel.big_modeling.load_checkpoint_and_dispatch")

-- Loaded on first use: a recipe that never touches them does not carry
-- their modules in its Lua heap, whose size sets how much garbage (tensor
-- handles among it) builds up between collections.
local on_first_use = { models = "accel.models", tokenizers = "accel.tokenizers", peft = "accel.peft",
                       parallel = "accel.parallel", quantization = "accel.quantization",
                       BitsAndBytesConfig = "accel.quantization.bits_and_bytes_config" }
setmetatable(accel, { __index = function(t, key)
  local name = on_first_use[key]
  if not name then return nil end
  local module = require(name)
  rawset(t, key, module)
  return module
end })

return accel
