-- nn modules: parameter counts and state_dict keys as PyTorch's, default
-- options, train/eval behaviour, containers, and errors that name the bad
-- value. Expected counts and keys were printed by /usr/bin/python3
-- (python3-torch 1.13.1): sum(p.numel() for p in m.parameters()) and
-- list(m.state_dict()) for the module in each line's comment.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, F = accel.nn, accel.nn.functional

accel.set_seed(7)

local function seq(shape, a)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return accel.arange(n):double():mul(a):sin():view(shape)
end

-- Parameter names then buffer names, in registration order.
local function keys(m)
  local out = {}
  for name in m:named_parameters() do out[#out + 1] = name end
  for name in m:named_buffers() do out[#out + 1] = name end
  return table.concat(out, " ")
end

local cases = {
  { nn.Linear(5, 7), 42, "weight bias" },                                  -- Linear(5, 7)
  { nn.Bilinear(3, 4, 5), 65, "weight bias" },                             -- Bilinear(3, 4, 5)
  { nn.Conv1d(4, 6, 5, { groups = 2 }), 66, "weight bias" },               -- Conv1d(4, 6, 5, groups=2)
  { nn.Conv2d(3, 8, 3, { bias = false }), 216, "weight" },                 -- Conv2d(3, 8, 3, bias=False)
  { nn.Conv2d(3, 8, { 3, 5 }), 368, "weight bias" },                       -- Conv2d(3, 8, (3, 5))
  { nn.BatchNorm1d(6), 12, "weight bias running_mean running_var num_batches_tracked" },  -- BatchNorm1d(6)
  { nn.BatchNorm2d(8, { affine = false }), 0, "running_mean running_var num_batches_tracked" },
  { nn.LayerNorm({ 4, 5 }), 40, "weight bias" },                           -- LayerNorm((4, 5))
  { nn.GroupNorm(2, 8), 16, "weight bias" },                               -- GroupNorm(2, 8)
  { nn.Embedding(10, 4), 40, "weight" },                                   -- Embedding(10, 4)
  { nn.MultiheadAttention(16, 4), 1088, "in_proj_weight in_proj_bias out_proj.weight out_proj.bias" },
  { nn.MultiheadAttention(16, 4, { kdim = 8, vdim = 12 }), 896,
    "q_proj_weight k_proj_weight v_proj_weight in_proj_bias out_proj.weight out_proj.bias" },
  { nn.MultiheadAttention(16, 4, { bias = false }), 1024, "in_proj_weight out_proj.weight" },
  { nn.TransformerEncoderLayer(16, 4, { dim_feedforward = 32 }), 2224,
    "self_attn.in_proj_weight self_attn.in_proj_bias self_attn.out_proj.weight self_attn.out_proj.bias " ..
    "linear1.weight linear1.bias linear2.weight linear2.bias norm1.weight norm1.bias norm2.weight norm2.bias" },
  { nn.PReLU(3), 3, "weight" },                                            -- PReLU(3)
}
for _, c in ipairs(cases) do
  local name = c[1].__name
  check.equal(c[1]:num_parameters(), c[2], name .. " parameter count as PyTorch's")
  check.equal(keys(c[1]), c[3], name .. " state_dict keys as PyTorch's")
end

-- nn.TransformerEncoderLayer(8, 2, dim_feedforward=6, dropout=0.0, activation=a, batch_first=True,
-- norm_first=nf).double(); its i-th named parameter (0-based) set to seq(shape, 0.1 + 0.07 * i);
-- layer(seq((2,3,8), .27), src_mask=torch.ones(3, 3, dtype=torch.bool).triu(1))
local function encoder_layer(options)
  options.dim_feedforward, options.dropout = 6, 0
  local layer = nn.TransformerEncoderLayer(8, 2, options):to(accel.float64)
  local i = 0
  accel.no_grad(function()
    for _, p in layer:named_parameters() do
      p:copy_(seq(p.shape, 0.1 + 0.07 * i))
      i = i + 1
    end
  end)
  return layer
end
do
  local src = seq({ 2, 3, 8 }, 0.27)
  local blocked = accel.tensor({ { false, true, true }, { false, false, true }, { false, false, false } })
  local post = encoder_layer({})
  check.near(post(src, { src_mask = blocked }), { 0, 0.4475909229, 2.312208234, -0.03535365644, -0.3956304117, -0.1136401274, -1.497071466, 0.7227746791, 0, 0.4777544021, 2.072035591, 0.0312997138, -0.4011706788, -0.15476957, -1.584241614, 0.8267834643, 0, 0.1024762891, 2.369496772, 0.3258123518, -0.3929125183, -0.125703663, -1.211734655, 0.6993180229, 0, 0.4507417002, 2.307996411, -0.03603128132, -0.3956874378, -0.1134598647, -1.500902544, 0.7244307401, 0, 0.09938840361, 2.609671825, 0.1319490087, -0.384911298, -0.005974465304, -1.253701758, 0.4537251544, 0, 0.09960705197, 2.372491185, 0.3174045256, -0.3928274859, -0.1259716505, -1.215607875, 0.6937637983 }, 1e-7, "TransformerEncoderLayer (post-norm, relu) as PyTorch's")
  check.near(post(src, { is_causal = true }), { 0, 0.4475909229, 2.312208234, -0.03535365644, -0.3956304117, -0.1136401274, -1.497071466, 0.7227746791, 0, 0.4777544021, 2.072035591, 0.0312997138, -0.4011706788, -0.15476957, -1.584241614, 0.8267834643, 0, 0.1024762891, 2.369496772, 0.3258123518, -0.3929125183, -0.125703663, -1.211734655, 0.6993180229, 0, 0.4507417002, 2.307996411, -0.03603128132, -0.3956874378, -0.1134598647, -1.500902544, 0.7244307401, 0, 0.09938840361, 2.609671825, 0.1319490087, -0.384911298, -0.005974465304, -1.253701758, 0.4537251544, 0, 0.09960705197, 2.372491185, 0.3174045256, -0.3928274859, -0.1259716505, -1.215607875, 0.6937637983 }, 1e-7, "is_causal per call is the triangular mask")
  check.near(encoder_layer({ is_causal = true })(src), { 0, 0.4475909229, 2.312208234, -0.03535365644, -0.3956304117, -0.1136401274, -1.497071466, 0.7227746791, 0, 0.4777544021, 2.072035591, 0.0312997138, -0.4011706788, -0.15476957, -1.584241614, 0.8267834643, 0, 0.1024762891, 2.369496772, 0.3258123518, -0.3929125183, -0.125703663, -1.211734655, 0.6993180229, 0, 0.4507417002, 2.307996411, -0.03603128132, -0.3956874378, -0.1134598647, -1.500902544, 0.7244307401, 0, 0.09938840361, 2.609671825, 0.1319490087, -0.384911298, -0.005974465304, -1.253701758, 0.4537251544, 0, 0.09960705197, 2.372491185, 0.3174045256, -0.3928274859, -0.1259716505, -1.215607875, 0.6937637983 }, 1e-7, "is_causal as a layer option")
  local pre = encoder_layer({ norm_first = true, activation = "gelu" })
  check.near(pre(src, { src_mask = blocked }), { 6.778440806, -6.397328416, 7.863818428, -1.467993738, 6.932366834, -4.416497419, 9.236141879, -5.300237402, -3.61673572, 7.261224021, 7.640955639, -12.9281786, 11.2883074, 3.756010588, -6.44332148, -4.678611038, 8.603898348, -11.26579392, 4.218945215, 3.826275238, 0.8222794661, -8.004287621, 11.90927663, -5.196105048, 7.244922146, -6.198765228, 9.886831909, -4.782368692, 9.632629181, -4.888295623, 9.050049102, -6.898271951, -3.423003476, 6.717499572, 7.406399176, -12.71407966, 10.87136101, 3.317058431, -6.177446547, -4.80855678, 8.266636944, -10.90644115, 4.477783003, 3.235339745, 1.400083622, -7.624145949, 11.69599135, -5.10964767 }, 1e-7, "TransformerEncoderLayer (norm_first, gelu) as PyTorch's")
  local custom = encoder_layer({ activation = function(x) return F.relu(x) end })
  check.near(custom(src, { src_mask = blocked }), { 0, 0.4475909229, 2.312208234, -0.03535365644, -0.3956304117, -0.1136401274, -1.497071466, 0.7227746791, 0, 0.4777544021, 2.072035591, 0.0312997138, -0.4011706788, -0.15476957, -1.584241614, 0.8267834643, 0, 0.1024762891, 2.369496772, 0.3258123518, -0.3929125183, -0.125703663, -1.211734655, 0.6993180229, 0, 0.4507417002, 2.307996411, -0.03603128132, -0.3956874378, -0.1134598647, -1.500902544, 0.7244307401, 0, 0.09938840361, 2.609671825, 0.1319490087, -0.384911298, -0.005974465304, -1.253701758, 0.4537251544, 0, 0.09960705197, 2.372491185, 0.3174045256, -0.3928274859, -0.1259716505, -1.215607875, 0.6937637983 }, 1e-7, "activation as a Lua function")
  local first = post(src)
  local later = accel.cat({ src[1]:narrow(1, 1, 2), accel.randn(1, 8, { dtype = accel.float64 }) }, 1)
  local causal_out = post(accel.stack({ later, src[2] }, 1), { is_causal = true })
  check.near(causal_out[1]:narrow(1, 1, 2), post(src, { is_causal = true })[1]:narrow(1, 1, 2), 1e-12,
             "with is_causal, later positions do not change earlier outputs")
  check.truthy((first - post(src, { is_causal = true })):abs():max():item() > 1e-6, "without the mask they do")
  local grad_src = src:clone():requires_grad_()
  post(grad_src, { is_causal = true }):sum():backward()
  check.truthy(post.linear1.weight.grad ~= nil and grad_src.grad ~= nil, "gradients reach the layer and its input")
end

-- MultiheadAttention: batch_first = false takes (L, N, E) and gives the same result transposed.
do
  local a = nn.MultiheadAttention(8, 2)
  local b = nn.MultiheadAttention(8, 2, { batch_first = false })
  b:load_state_dict(a:state_dict())
  local x = accel.randn(2, 5, 8)
  local out_a, weights_a = a(x)
  local out_b, weights_b = b(x:transpose(1, 2))
  check.near(out_b:transpose(1, 2), out_a, 1e-6, "batch_first = false is (L, N, E)")
  check.near(weights_b, weights_a, 1e-6, "the weights are (N, L, S) either way")
  check.equal(table.concat(weights_a.shape, "x"), "2x5x5", "averaged attention weights")
  local bound = math.sqrt(6 / (8 + 24))
  check.truthy(a.in_proj_weight:abs():max():item() <= bound, "in_proj_weight is Xavier-uniform")
  check.near(a.in_proj_bias:abs():sum(), 0, 0, "in_proj_bias starts at zero")
  check.near(a.out_proj.bias:abs():sum(), 0, 0, "out_proj.bias starts at zero")
  local padding = accel.tensor({ { false, false, false, false, true }, { false, false, false, false, false } })
  local _, w = a(x, x, x, { key_padding_mask = padding })
  check.near(w[1]:select(2, 5), { 0, 0, 0, 0, 0 }, 0, "a padded key gets no attention")
  a:train()
  local dropped = nn.MultiheadAttention(8, 2, { dropout = 0.5 })
  check.truthy((dropped(x) - dropped(x)):abs():max():item() > 0, "attention dropout in training")
  dropped:eval()
  check.near(dropped(x), dropped(x), 0, "no attention dropout in eval")
  check.raises(function() nn.MultiheadAttention(10, 3) end, "heads", "embed_dim 10", "num_heads 3")
  check.raises(function() a(x, x, x, { attn_mask = accel.zeros(4, 4) }) end, "mask shape", "attn_mask", "[4, 4]", "[5, 5]")
  check.raises(function() a(x, x, x, { key_padding_mask = padding, need_weight = false }) end, "typo",
               "unknown option 'need_weight'")
end

-- Conv: padding modes, 'same', and errors naming shapes.
do
  local conv = nn.Conv2d(2, 3, 3, { padding = 1, padding_mode = "reflect" })
  local x = accel.randn(1, 2, 5, 5)
  check.near(conv(x), F.conv2d(F.pad(x, { 1, 1, 1, 1 }, { mode = "reflect" }), conv.weight, conv.bias), 1e-6,
             "padding_mode reflect pads, then convolves")
  local same = nn.Conv1d(2, 2, 4, { padding = "same", padding_mode = "circular" })
  check.equal(same(accel.randn(1, 2, 7)):size(3), 7, "'same' with an even kernel and a padding mode")
  local c = nn.Conv2d(2, 3, 3)
  check.raises(function() c(accel.randn(5, 5)) end, "2-D input", "conv2d", "[5, 5]")
  check.raises(function() c(accel.randn(1, 4, 5, 5)) end, "wrong channels", "conv2d", "float32[1, 4, 5, 5]")
  check.raises(function() nn.Conv2d(3, 4, 3, { groups = 2 }) end, "groups", "in_channels 3", "groups 2")
  check.raises(function() nn.Conv2d(3, 4, { 3 }) end, "kernel size", "kernel_size", "2 numbers")
  check.raises(function() nn.Conv2d(3, 4, 3, { strid = 2 }) end, "typo", "nn.Conv2d", "unknown option 'strid'")
  check.raises(function() nn.Conv2d(3, 4, 3, { padding = "full" }) end, "padding string", "padding")
  local fan_in_bound = 1 / math.sqrt(2 * 3 * 3)
  check.truthy(c.weight:abs():max():item() <= fan_in_bound and c.bias:abs():max():item() <= fan_in_bound,
               "conv weight and bias within 1/sqrt(fan_in)")
end

-- Pooling modules
do
  local x = accel.randn(2, 3, 8, 8)
  check.equal(table.concat(nn.MaxPool2d(2)(x).shape, "x"), "2x3x4x4", "MaxPool2d(2) halves H and W")
  check.equal(table.concat(nn.AvgPool2d(3, { stride = 1, padding = 1 })(x).shape, "x"), "2x3x8x8", "AvgPool2d")
  check.near(nn.AdaptiveAvgPool2d(1)(x):view(2, 3), x:mean({ 3, 4 }), 1e-6, "AdaptiveAvgPool2d(1) is the mean")
  check.equal(table.concat(nn.MaxPool1d(2)(accel.randn(1, 2, 6)).shape, "x"), "1x2x3", "MaxPool1d")
  check.raises(function() nn.MaxPool2d(2, { stide = 1 }) end, "typo", "unknown option 'stide'")
end

-- BatchNorm: batch statistics and running updates in training, running statistics in eval.
do
  local bn = nn.BatchNorm1d(3, { momentum = 0.5 })
  local x = accel.randn(16, 3) * 2 + 1
  local y = bn(x)
  check.near(y:mean(1), { 0, 0, 0 }, 1e-5, "training output has zero batch mean")
  check.near(bn.running_mean, x:mean(1) * 0.5, 1e-6, "running_mean moves by momentum")
  check.equal(bn.num_batches_tracked:item(), 1, "num_batches_tracked counts training batches")
  bn:eval()
  local mean, var = bn.running_mean, bn.running_var
  check.near(bn(x), (x - mean) / (var + 1e-5):sqrt() * bn.weight + bn.bias, 1e-5, "eval uses the running statistics")
  check.equal(bn.num_batches_tracked:item(), 1, "eval does not count batches")
  check.raises(function() nn.BatchNorm2d(3)(accel.randn(2, 3, 4)) end, "BatchNorm2d on 3-D", "BatchNorm2d",
               "4-D", "[2, 3, 4]")
  check.raises(function() nn.BatchNorm1d(3)(accel.randn(2, 4)) end, "wrong channels", "running_mean")
  check.raises(function() nn.BatchNorm1d(3)(accel.randn(1, 3)) end, "one value per channel",
               "more than 1 value per channel")

  local cumulative = nn.BatchNorm2d(2, { momentum = false })
  local a, b = accel.randn(4, 2, 3, 3), accel.randn(4, 2, 3, 3) + 2
  cumulative(a)
  cumulative(b)
  check.near(cumulative.running_mean, (a:mean({ 1, 3, 4 }) + b:mean({ 1, 3, 4 })) / 2, 1e-5,
             "momentum = false averages all batches")
  local untracked = nn.BatchNorm1d(3, { track_running_stats = false })
  check.equal(#untracked:buffers(), 0, "no running statistics when not tracked")
  untracked:eval()
  check.near(untracked(x):mean(1), { 0, 0, 0 }, 1e-5, "untracked batch norm uses batch statistics in eval")
end

-- Dropout: zeroes about p of the elements and scales the rest in training, nothing in eval.
do
  local drop = nn.Dropout(0.25)
  local y = drop(accel.ones(100000))
  local zeros = y:eq(0):sum():item() / 100000
  check.truthy(math.abs(zeros - 0.25) < 0.01, "about p of the elements are zeroed: " .. zeros)
  check.near(y:max(), 1 / 0.75, 1e-6, "survivors are scaled by 1 / (1 - p)")
  drop:eval()
  check.near(drop(accel.ones(10)), accel.ones(10), 0, "eval passes the input through")
  check.raises(function() nn.Dropout(1.5) end, "p out of range", "nn.Dropout", "1.5")
  local d2 = nn.Dropout2d(0.5)
  local channels = d2(accel.ones(1, 64, 4, 4)):sum({ 3, 4 }):view(-1)
  check.truthy(channels:eq(0):sum():item() > 0 and channels:eq(32):sum():item() > 0,
               "Dropout2d zeroes whole channels and scales the rest")
end

-- Embedding: 1-based ids, padding row, pretrained weights.
do
  local emb = nn.Embedding(6, 3, { padding_idx = 1 })
  check.near(emb.weight[1], { 0, 0, 0 }, 0, "the padding row starts at zero")
  emb(accel.LongTensor({ 1, 2, 1 })):sum():backward()
  check.near(emb.weight.grad[1], { 0, 0, 0 }, 0, "the padding row gets no gradient")
  check.near(emb.weight.grad[2], { 1, 1, 1 }, 0, "looked-up rows do")
  check.raises(function() emb(accel.LongTensor({ 2, 0 })) end, "id 0", "embedding", "id 0", "1-based")
  check.raises(function() emb(accel.LongTensor({ 7 })) end, "id 7", "id 7", "1 to 6")
  check.raises(function() emb(accel.tensor({ 1.5, 2 })) end, "float ids", "integer tensor")
  check.raises(function() emb(accel.tensor({ 1, 2 })) end, "ids from a number table", "ids must be an integer tensor",
               "{dtype = accel.int64}", "accel.LongTensor")
  check.raises(function() nn.Embedding(6, 3, { padding_idx = 0 }) end, "padding_idx 0", "padding_idx 0")
  local pretrained = nn.Embedding.from_pretrained(accel.eye(3))
  check.near(pretrained(accel.LongTensor({ 2 })), { { 0, 1, 0 } }, 0, "from_pretrained looks up the given rows")
  check.equal(#pretrained:parameters(), 0, "from_pretrained is frozen by default")
  check.truthy(pretrained:state_dict().weight ~= nil, "a frozen weight stays in the state dict")
  check.equal(#nn.Embedding.from_pretrained(accel.eye(3), { freeze = false }):parameters(), 1, "freeze = false")
  -- Freezing with requires_grad_(false), as PyTorch recipes do, keeps the
  -- weight in the state dict and in to(); requires_grad_(true) unfreezes it.
  local frozen = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2))
  frozen[1].weight:requires_grad_(false)
  check.equal(#frozen:parameters(), 3, "a weight frozen by requires_grad_(false) leaves parameters()")
  check.truthy(frozen:state_dict()["1.weight"]:is_set_to(frozen[1].weight), "and stays in the state dict, the same tensor")
  frozen:to(accel.float64)
  check.equal(frozen[1].weight.dtype, accel.float64, "and moves with to()")
  frozen[1].weight:requires_grad_(true)
  check.equal(#frozen:parameters(), 4, "requires_grad_(true) makes it a parameter again")
  check.truthy(frozen:parameters()[1]:is_set_to(frozen[1].weight), "in its place")
  local big = nn.Embedding(1000, 50)
  check.near(((big.weight - big.weight:mean()) ^ 2):mean():sqrt():item(), 1, 0.05, "weights start N(0, 1)")
end

-- Norm layers
do
  local ln = nn.LayerNorm(4, { eps = 1e-3 })
  local x = accel.randn(3, 4)
  check.near(ln(x), (x - x:mean(2, true)) / (((x - x:mean(2, true)) ^ 2):mean(2, true) + 1e-3):sqrt(), 1e-5,
             "LayerNorm normalises the last dims")
  check.equal(#nn.LayerNorm(4, { elementwise_affine = false }):parameters(), 0, "LayerNorm without affine")
  check.raises(function() nn.GroupNorm(3, 8) end, "groups", "num_channels 8", "num_groups 3")
  check.raises(function() nn.LayerNorm(4)(accel.randn(3, 5)) end, "shape mismatch", "layer_norm", "[3, 5]")
end

-- Activations, Flatten, Identity
do
  local x = accel.randn(2, 3, 4)
  check.near(nn.Softmax(-1)(x):sum(-1), accel.ones(2, 3), 1e-6, "Softmax(dim)")
  check.near(nn.LogSoftmax(2)(x), F.log_softmax(x, 2), 0, "LogSoftmax(dim) is 1-based")
  check.raises(function() nn.Softmax() end, "Softmax needs a dim", "nn.Softmax", "dim")
  check.near(nn.LeakyReLU(0.1)(accel.tensor({ -1, 2 }, { dtype = accel.float32 })), { -0.1, 2 }, 1e-7, "LeakyReLU(slope)")
  check.near(nn.Hardtanh(-2, 2)(accel.tensor({ -3, 1, 3 }, { dtype = accel.float32 })), { -2, 1, 2 }, 0, "Hardtanh(min, max)")
  check.near(nn.PReLU()(accel.tensor({ -2, 2 }, { dtype = accel.float32 })), { -0.5, 2 }, 1e-7, "PReLU starts at 0.25")
  check.equal(table.concat(nn.Flatten()(x).shape, "x"), "2x12", "Flatten keeps the batch dim")
  check.equal(table.concat(nn.Flatten(1, 2)(x).shape, "x"), "6x4", "Flatten(1, 2)")
  check.equal(table.concat(nn.Unflatten(2, { 3, 2, 2 })(x:flatten(2)).shape, "x"), "2x3x2x2", "Unflatten")
  check.truthy(nn.Identity()(x) == x, "Identity returns its input")
end

-- Containers
do
  local seq_model = nn.Sequential(nn.Linear(2, 3)):append(nn.ReLU()):append(nn.Linear(3, 1))
  check.equal(#seq_model, 3, "Sequential:append")
  check.equal(keys(seq_model), "1.weight 1.bias 3.weight 3.bias", "Sequential keys")

  -- Between two built-in layers the intermediate tensor is released at
  -- once: of 2x1000 (8 KB) and 2x1000 (8 KB) made inside, only the 2x1
  -- output stays counted. A layer of the recipe's own that keeps its output,
  -- and the input itself, are left alone.
  local wide = nn.Sequential(nn.Linear(2, 1000), nn.ReLU(), nn.Linear(1000, 1))
  local input = accel.randn(2, 2)
  collectgarbage()
  local before = accel.tensor_bytes()
  local out = wide(input)
  check.equal(accel.tensor_bytes() - before, 2 * 4, "Sequential releases its intermediate tensors")
  check.near(out, wide[3](wide[2](wide[1](input))), 1e-6, "the same output")

  local Keep = nn.Module:extend("Keep")
  function Keep:forward(x)
    self.seen, self.made = x, x * 1
    return self.made
  end
  local keeping = nn.Sequential(nn.Identity(), nn.Linear(2, 3), Keep(), nn.ReLU(), nn.Identity(), nn.Linear(3, 1))
  local y = keeping(input)
  check.equal(table.concat(input.shape, "x"), "2x2", "the input is untouched")
  check.near(keeping[3].seen, keeping[2](input), 1e-6, "a kept input is untouched")
  check.near(keeping[3].made, keeping[3].seen, 0, "a kept output is untouched")
  check.near(y, keeping[6](keeping[4](keeping[3].made)), 1e-6, "the same output")

  local Net = nn.Module:extend("Net")
  function Net:init()
    self.blocks = nn.ModuleList({ nn.Linear(2, 2), nn.Linear(2, 2) })
    self.blocks:append(nn.Linear(2, 2))
    self.heads = nn.ModuleDict({ { "cls", nn.Linear(2, 3) }, { "reg", nn.Linear(2, 1, false) } })
    self.scale = nn.Parameter(accel.ones(1))
  end
  function Net:forward(x)
    for _, block in ipairs(self.blocks) do x = block(x):relu() end
    return self.heads.cls(x) * self.scale, self.heads.reg(x)
  end
  local net = Net()
  check.equal(keys(net), "scale blocks.1.weight blocks.1.bias blocks.2.weight blocks.2.bias blocks.3.weight " ..
              "blocks.3.bias heads.cls.weight heads.cls.bias heads.reg.weight", "ModuleList and ModuleDict paths")
  check.equal(#net.blocks, 3, "#ModuleList")
  check.equal(table.concat(net.heads:keys(), ","), "cls,reg", "ModuleDict keeps a pair list's order")
  local names = {}
  for name in nn.ModuleDict({ zeta = nn.Identity(), alpha = nn.Identity() }):items() do names[#names + 1] = name end
  check.equal(table.concat(names, ","), "alpha,zeta", "a table of names is taken in sorted order")
  local a, b = net(accel.randn(4, 2))
  check.equal(a:size(2) + b:size(2), 4, "forward through the containers")
  local sd = net:state_dict()
  sd["heads.reg.weight"] = nil
  sd["heads.box.weight"] = accel.zeros(1)
  check.raises(function() Net():load_state_dict(sd) end, "container keys", "missing keys: heads.reg.weight",
               "unexpected keys: heads.box.weight")
  check.raises(function() nn.ModuleDict({ ["a.b"] = nn.Identity() }) end, "dotted name", "a.b")
  check.raises(function() nn.ModuleDict({ train = nn.Identity() }) end, "method name", "'train'")
  check.raises(function() nn.ModuleList({ nn.Identity(), 3 }) end, "not a module", "element 2")
  check.raises(function() nn.ModuleList({ nn.Identity() })(accel.ones(1)) end, "no forward", "no forward")
  check.raises(function() nn.Parameter(3) end, "not a tensor", "nn.Parameter")
  local p = nn.Parameter(accel.zeros(2))
  check.truthy(p.requires_grad and p.is_leaf, "nn.Parameter makes a trainable leaf")
end

check.raises(function() nn.Linear(0, 3) end, "bad size", "nn.Linear", "in_features", "0")
check.raises(function() nn.Bilinear(2, 3, 4)(accel.randn(5, 2), accel.randn(4, 3)) end, "batch mismatch",
             "bilinear")

check.done("test_nn_modules")
