-- nn.functional losses and activations: values against PyTorch 1.13
-- (recorded once, with the inputs below in float64, e.g.
-- `F.cross_entropy(logits, torch.tensor([1, 2, 3]), label_smoothing=0.1)`;
-- PyTorch's 0-based classes are accel's minus one), and every loss's
-- gradient against finite differences.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local gradcheck = dofile(arg[0]:match("(.*/)") .. "helpers/gradcheck.lua")
local F = accel.nn.functional

local f64 = { dtype = accel.float64 }
local logits = accel.tensor({ { 1.0, 2.0, 0.5, -1.0 }, { 0.3, -0.2, 2.2, 1.1 }, { -0.5, 0.0, 0.5, 1.0 } }, f64)
local y = accel.LongTensor({ 2, 3, 4 })  -- torch.tensor([1, 2, 3])
local w = accel.tensor({ 1.0, 2.0, 0.5, 1.5 }, f64)
local a = accel.tensor({ { 0.5, -1.0, 2.0 }, { 1.5, 0.0, -0.5 } }, f64)
local b = accel.tensor({ { 0.0, 1.0, 1.0 }, { 2.0, 0.25, -2.0 } }, f64)
local bits = accel.tensor({ { 1.0, 0.0, 1.0 }, { 0.0, 0.0, 1.0 } }, f64)

-- cross_entropy with 1-based class targets
check.near(F.cross_entropy(logits, y), 0.5785351384302366, 1e-12, "cross_entropy")
check.near(F.cross_entropy(logits, y, { reduction = "sum" }), 1.7356054152907099, 1e-12, "cross_entropy sum")
check.near(F.cross_entropy(logits, y, { reduction = "none" }),
           { 0.49518189808585605, 0.45308484550652445, 0.7873386716983295 }, 1e-12, "cross_entropy none")
check.near(F.cross_entropy(logits, y, { label_smoothing = 0.1 }), 0.69436847176357, 1e-12,
           "cross_entropy label_smoothing")
-- torch targets [1, -100, 3]: the default ignore_index; here padding 0 is ignored
check.near(F.cross_entropy(logits, accel.LongTensor({ 2, 0, 4 }), { ignore_index = 0 }), 0.6412602848920927, 1e-12,
           "cross_entropy ignore_index")
-- torch targets [1, 0, 3] with ignore_index=0, label_smoothing=0.2: accel's class 1
check.near(F.cross_entropy(logits, accel.LongTensor({ 2, 1, 4 }), { ignore_index = 1, label_smoothing = 0.2 }),
           0.8537602848920928, 1e-12, "cross_entropy ignore_index with label_smoothing")
check.near(F.cross_entropy(logits, y, { weight = w }), 0.5994785566181171, 1e-12, "cross_entropy weight")
local probs = F.softmax(accel.tensor({ { 0.1, 0.2, 0.3, 0.4 }, { 1, 0, 0, 0 }, { 0.25, 0.25, 0.25, 0.25 } }, f64) * 3, -1)
check.near(F.cross_entropy(logits, probs), 1.9886414578653817, 1e-12, "cross_entropy with class probabilities")
check.near(F.cross_entropy(logits[1], accel.tensor(2, { dtype = accel.int64 })), 0.49518189808585605, 1e-12, "cross_entropy unbatched")

local log_probs = F.log_softmax(logits, -1)
check.near(F.nll_loss(log_probs, y), 0.5785351384302366, 1e-12, "nll_loss")
check.near(F.nll_loss(log_probs, y, { weight = w, reduction = "sum" }), 2.3979142264724684, 1e-12,
           "nll_loss weight, sum")
check.near(F.mse_loss(a, b), 1.3020833333333333, 1e-12, "mse_loss")
check.near(F.mse_loss(a, b, { reduction = "sum" }), 7.8125, 1e-12, "mse_loss sum")
check.near(F.l1_loss(a, b), 0.9583333333333334, 1e-12, "l1_loss")
check.near(F.l1_loss(a, b, { reduction = "none" }), { { 0.5, 2, 1 }, { 0.5, 0.25, 1.5 } }, 1e-12, "l1_loss none")
check.near(F.smooth_l1_loss(a, b), 0.546875, 1e-12, "smooth_l1_loss")
check.near(F.smooth_l1_loss(a, b, { beta = 0.5 }), 0.71875, 1e-12, "smooth_l1_loss beta")
check.near(F.smooth_l1_loss(a, b, { beta = 2, reduction = "sum" }), 1.953125, 1e-12, "smooth_l1_loss beta, sum")
check.near(F.huber_loss(a, b, { delta = 0.5 }), 0.359375, 1e-12, "huber_loss")
check.near(F.binary_cross_entropy_with_logits(a, bits), 0.7138173542440178, 1e-12, "bce with logits")
local pw = accel.tensor({ 2.0, 1.0, 0.5 }, f64)
check.near(F.binary_cross_entropy_with_logits(a, bits, { pos_weight = pw }), 0.7010797686721123, 1e-12,
           "bce with logits pos_weight")
check.near(F.binary_cross_entropy_with_logits(a, bits, { weight = pw, reduction = "sum" }), 5.907891890015426, 1e-12,
           "bce with logits weight, sum")
check.near(F.binary_cross_entropy(a:sigmoid(), bits), 0.7138173542440178, 1e-12, "binary_cross_entropy")
local input, target = F.log_softmax(a, -1), F.softmax(b, -1)
check.near(F.kl_div(input, target), 0.1312383859276829, 1e-12, "kl_div mean (per element)")
check.near(F.kl_div(input, target, { reduction = "batchmean" }), 0.39371515778304866, 1e-12, "kl_div batchmean")
check.near(F.kl_div(input, target, { reduction = "sum" }), 0.7874303155660973, 1e-12, "kl_div sum")
check.near(F.kl_div(input, target:log(), { reduction = "batchmean", log_target = true }), 0.39371515778304866, 1e-12,
           "kl_div log_target")

-- Gradients of every loss against finite differences (through the input).
local function grads(name, loss)
  gradcheck(check, name, loss, accel.randn(3, 4))
end
accel.set_seed(5)
local t34 = accel.randn(3, 4, f64)
local bits34 = accel.rand(3, 4, f64):gt(0.5):double()
grads("cross_entropy", function(x) return F.cross_entropy(x, y) end)
grads("cross_entropy label_smoothing, ignore_index, weight", function(x)
  return F.cross_entropy(x, accel.LongTensor({ 2, 0, 4 }), { label_smoothing = 0.3, ignore_index = 0, weight = w })
end)
grads("cross_entropy probabilities", function(x) return F.cross_entropy(x, F.softmax(t34, 2)) end)
grads("nll_loss", function(x) return F.nll_loss(F.log_softmax(x, 2), y, { weight = w }) end)
grads("mse_loss", function(x) return F.mse_loss(x, t34) end)
grads("l1_loss", function(x) return F.l1_loss(x, t34, { reduction = "sum" }) end)
grads("smooth_l1_loss", function(x) return F.smooth_l1_loss(x, t34, { beta = 0.7 }) end)
grads("huber_loss", function(x) return F.huber_loss(x, t34, { delta = 0.7 }) end)
grads("bce with logits", function(x)
  return F.binary_cross_entropy_with_logits(x, bits34, { pos_weight = accel.tensor({ 2, 1, 0.5, 3 }, f64) })
end)
grads("binary_cross_entropy", function(x) return F.binary_cross_entropy(x:sigmoid(), bits34) end)
grads("kl_div batchmean", function(x)
  return F.kl_div(F.log_softmax(x, 2), F.softmax(t34, 2), { reduction = "batchmean" })
end)
grads("kl_div log_target", function(x)
  return F.kl_div(F.log_softmax(t34, 2), F.log_softmax(x, 2), { reduction = "sum", log_target = true })
end)

-- Activations: F.gelu(x), F.gelu(x, approximate='tanh'), F.silu(x), ... of
-- x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], dtype=torch.float64)
local x = accel.tensor({ -2.0, -0.5, 0.0, 0.5, 2.0 }, f64)
check.near(F.relu(x), { 0, 0, 0, 0.5, 2 }, 0, "relu")
check.near(F.gelu(x), { -0.04550026389635842, -0.15426876936299344, 0, 0.34573123063700656, 1.9544997361036416 },
           1e-12, "gelu")
check.near(F.gelu(x, { approximate = "tanh" }),
           { -0.04540230591222494, -0.15428599017485606, 0, 0.34571400982514394, 1.954597694087775 }, 1e-12,
           "gelu tanh")
check.near(F.silu(x), { -0.2384058440442351, -0.1887703343990727, 0, 0.3112296656009273, 1.7615941559557646 },
           1e-12, "silu")
check.near(F.tanh(x), x:tanh(), 0, "tanh")
check.near(F.sigmoid(x), x:sigmoid(), 0, "sigmoid")
check.near(F.leaky_relu(x, 0.1), { -0.2, -0.05, 0, 0.5, 2 }, 1e-12, "leaky_relu")
check.near(F.leaky_relu(x), { -0.02, -0.005, 0, 0.5, 2 }, 1e-12, "leaky_relu default slope")
check.near(F.elu(x, 0.5), { -0.43233235838169365, -0.1967346701436833, 0, 0.5, 2 }, 1e-12, "elu")
check.near(F.softplus(x, 2, 1),
           { 0.009074963958904869, 0.15663084375911143, 0.34657359027997264, 0.6566308437591114, 2 }, 1e-12,
           "softplus(beta, threshold)")
check.near(F.hardtanh(x, -1, 0.75), { -1, -0.5, 0, 0.5, 0.75 }, 0, "hardtanh")
check.near(F.softmax(a, 2), { { 0.1752903921400367, 0.039112573270687456, 0.7855970345892759 },
                              { 0.7361247243125938, 0.1642516276250878, 0.09962364806231833 } }, 1e-12, "softmax")
check.near(F.log_softmax(a, 1), { { -1.3132616875182228, -1.3132616875182228, -0.07888973429254957 },
                                  { -0.31326168751822286, -0.31326168751822286, -2.5788897342925496 } }, 1e-12,
           "log_softmax over dim 1")
check.equal(F.softmax(accel.ones(2), 1, { dtype = accel.float64 }).dtype, accel.float64, "softmax {dtype}")
check.near(F.dropout(x, 0.5, false), x, 0, "dropout off outside training")
check.near(F.dropout(x, 0), x, 0, "dropout with p = 0")
check.near(F.dropout(accel.ones(1000), 0.25):eq(0):double():mean(), 0.25, 0.2, "dropout drops about p")
check.near(F.dropout(accel.ones(1000), 0.25):max(), 1 / 0.75, 1e-6, "dropout rescales what it keeps")
gradcheck(check, "gelu tanh", function(v) return F.gelu(v, { approximate = "tanh" }):sum() end, x)
gradcheck(check, "silu", function(v) return F.silu(v):sum() end, x)
gradcheck(check, "softmax", function(v) return (F.softmax(v, 2) * b):sum() end, a)

-- Bad calls name the function and the value.
check.raises(function() return F.cross_entropy(logits, accel.LongTensor({ 0, 1, 2 })) end, "class 0",
             "accel.nn.functional.cross_entropy", "1-based", "0")
check.raises(function() return F.cross_entropy(logits, accel.LongTensor({ 1, 5, 2 })) end, "class past the end",
             "accel.nn.functional.cross_entropy", "class target 5 is out of range for 4 classes")
check.raises(function() return F.nll_loss(log_probs, accel.tensor({ 1, 2, 3 }, { dtype = accel.float32 })) end, "float targets",
             "accel.nn.functional.nll_loss", "integer tensor", "float32", "accel.int64")
-- a table of numbers is float32, so class ids made from one are refused with the way out
check.raises(function() return F.cross_entropy(logits, accel.tensor({ 2, 3, 4 })) end, "class ids from a number table",
             "accel.nn.functional.cross_entropy", "class targets must be an integer tensor",
             "{dtype = accel.int64}", "accel.LongTensor")
check.raises(function() return F.cross_entropy(logits, y, { reduction = "avg" }) end, "bad reduction",
             "accel.nn.functional.cross_entropy", "'avg'")
check.raises(function() return F.cross_entropy(logits, y, { label_smothing = 0.1 }) end, "misspelt option",
             "accel.nn.functional.cross_entropy", "unknown option 'label_smothing'")
check.raises(function() return F.cross_entropy(logits, y, { label_smoothing = 1.5 }) end, "smoothing above 1",
             "label_smoothing", "1.5")
check.raises(function() return F.cross_entropy(logits, y, { weight = 2 }) end, "weight must be a tensor",
             "option 'weight' must be a tensor, got number")
check.raises(function() return F.mse_loss(a, accel.ones(3, 2, f64)) end, "shape mismatch", "accel.nn.functional.mse_loss",
             "float64[2, 3]", "float64[3, 2]")
check.raises(function() return F.kl_div(input, target, { reduction = "avg" }) end, "kl_div reduction",
             "'batchmean'", "'avg'")
check.raises(function() return F.mse_loss(a, b, { reduction = "batchmean" }) end, "batchmean is kl_div's",
             "accel.nn.functional.mse_loss", "'batchmean'")
check.raises(function() return F.smooth_l1_loss(a, b, { beta = -1 }) end, "negative beta", "beta", "-1")
check.raises(function() return F.gelu(x, { approximate = "fast" }) end, "bad approximate",
             "accel.nn.functional.gelu", "'fast'")
check.raises(function() return F.softmax(x, 2) end, "softmax dim", "accel.nn.functional.softmax",
             "dim 2 is out of range")
check.raises(function() return F.softmax(x) end, "softmax needs a dim", "accel.nn.functional.softmax",
             "argument 2")
check.raises(function() return F.dropout(x, 1.5) end, "dropout probability", "accel.nn.functional.dropout", "1.5")

check.done("test_functional_losses")
