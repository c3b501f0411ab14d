-- Gradients of nn.functional's layers against central finite differences,
-- in float64, with respect to every tensor input (data and weights).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local F = accel.nn.functional

accel.set_seed(11)

local f64 = { dtype = accel.float64 }

local function numeric_grad(loss, x, eps)
  eps = eps or 1e-6
  local flat = x:view(-1)
  local out = {}
  accel.no_grad(function()
    for i = 1, flat:numel() do
      local saved = flat[i]:item()
      flat[i] = saved + eps
      local up = loss():item()
      flat[i] = saved - eps
      local down = loss():item()
      flat[i] = saved
      out[i] = (up - down) / (2 * eps)
    end
  end)
  return out
end

-- fn(inputs...) -> tensor; the loss is its dot product with fixed random
-- weights, so that every output element matters (a plain sum would hide
-- normalisation layers' gradients).
local function gradcheck(name, fn, inputs)
  for i, x in ipairs(inputs) do inputs[i] = x:double():requires_grad_() end
  local weights = accel.randn(fn(unpack(inputs)).shape, f64)
  local function loss() return (fn(unpack(inputs)) * weights):sum() end
  loss():backward()
  for i, x in ipairs(inputs) do
    check.near(x.grad:view(-1), numeric_grad(loss, x), 1e-5, string.format("%s: gradient of input %d", name, i))
  end
end

local r = accel.randn

gradcheck("conv1d", function(x, w, b) return F.conv1d(x, w, b, { stride = 2, padding = 1, dilation = 2 }) end,
          { r(2, 2, 7), r(3, 2, 2), r(3) })
gradcheck("conv2d with groups",
          function(x, w, b) return F.conv2d(x, w, b, { stride = { 1, 2 }, padding = { 1, 0 }, groups = 2 }) end,
          { r(1, 4, 4, 5), r(2, 2, 3, 2), r(2) })
gradcheck("conv2d 'same'", function(x, w) return F.conv2d(x, w, nil, { padding = "same" }) end,
          { r(1, 1, 4, 4), r(2, 1, 3, 3) })
gradcheck("max_pool2d", function(x) return F.max_pool2d(x, 2, { stride = 1 }) end, { r(1, 2, 4, 4) })
gradcheck("avg_pool2d", function(x) return F.avg_pool2d(x, 3, { stride = 2, padding = 1 }) end, { r(1, 2, 5, 5) })
gradcheck("adaptive_avg_pool2d", function(x) return F.adaptive_avg_pool2d(x, { 2, 3 }) end, { r(1, 2, 5, 4) })
gradcheck("batch_norm (training)",
          function(x, w, b) return F.batch_norm(x, nil, nil, w, b, { training = true }) end,
          { r(4, 3, 2), r(3), r(3) })
gradcheck("layer_norm", function(x, w, b) return F.layer_norm(x, { 2, 3 }, w, b) end, { r(2, 2, 3), r(2, 3), r(2, 3) })
gradcheck("group_norm", function(x, w, b) return F.group_norm(x, 2, w, b) end, { r(2, 4, 3), r(4), r(4) })
gradcheck("normalize", function(x) return F.normalize(x, { dim = 2 }) end, { r(3, 4) })
local ids = accel.LongTensor({ { 1, 3 }, { 3, 5 } })
gradcheck("embedding", function(w) return F.embedding(ids, w) end, { r(5, 3) })
gradcheck("bilinear", function(a, b, w, bias) return F.bilinear(a, b, w, bias) end, { r(2, 3), r(2, 2), r(2, 3, 2), r(2) })
gradcheck("scaled_dot_product_attention",
          function(q, k, v) return F.scaled_dot_product_attention(q, k, v, { is_causal = true }) end,
          { r(2, 3, 4), r(2, 3, 4), r(2, 3, 2) })
local padding = accel.tensor({ { false, false, true }, { false, false, false } })
gradcheck("multi_head_attention",
          function(x, w_in, b_in, w_out)
            return F.multi_head_attention(x, x, x, 2, w_in, b_in, w_out, nil,
                                          { key_padding_mask = padding, is_causal = true, need_weights = false })
          end,
          { r(2, 3, 4), r(12, 4), r(12), r(4, 4) })
gradcheck("pad reflect", function(x) return F.pad(x, { 2, 1, 1, 0 }, { mode = "reflect" }) end, { r(1, 1, 3, 4) })
gradcheck("pad circular", function(x) return F.pad(x, { 1, 2 }, { mode = "circular" }) end, { r(1, 2, 3) })
gradcheck("prelu", function(x, w) return F.prelu(x, w) end, { r(2, 3, 2), r(3) })
for _, name in ipairs({ "leaky_relu", "elu", "celu", "selu", "softplus", "mish", "hardswish", "logsigmoid",
                        "softsign" }) do
  gradcheck(name, F[name], { r(2, 5) })
end

check.done("test_nn_gradcheck")
