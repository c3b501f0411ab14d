-- Module options are honoured and checked: GELU's approximate, Linear's
-- bias in an options table, and for every module an unknown option or a
-- value of the wrong type is an error naming the key and the module.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn = accel.nn
local F = nn.functional

-- GELU{approximate = "tanh"}: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
do
  local xs = { -3, -1.5, -0.5, 0, 0.25, 1, 2.5 }
  local x = accel.tensor(xs, { dtype = accel.float64 })
  local want = {}
  for i, v in ipairs(xs) do
    local inner = math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)
    want[i] = 0.5 * v * (1 + math.tanh(inner))
  end
  check.near(nn.GELU{ approximate = "tanh" }(x), want, 1e-12, "GELU tanh against its closed form")
  check.near(nn.GELU("tanh")(x), want, 1e-12, "GELU('tanh'), PyTorch's positional form")
  check.near(F.gelu(x, { approximate = "tanh" }), want, 1e-12, "functional gelu tanh")
  -- The exact form differs from the tanh one (by about 2e-4 at x = -1.5).
  local exact = nn.GELU()(x)
  check.near(exact, F.gelu(x), 0, "GELU() is the exact form")
  check.near(nn.GELU{ approximate = "none" }(x), exact, 0, "GELU{approximate = 'none'} is the exact form")
  check.truthy((exact - accel.tensor(want, { dtype = accel.float64 })):abs():max():item() > 1e-5,
               "the exact and tanh forms differ")
  check.raises(function() nn.GELU{ approximate = "fast" } end, "a bad approximate", "nn.GELU", "'none' or 'tanh'", "fast")
  check.raises(function() nn.GELU{ approximate = true } end, "approximate of the wrong type", "nn.GELU",
               "'approximate' must be a string")
end

-- Unknown options are refused, naming the key and the module, for modules
-- with and without options.
local unknown = {
  { "nn.SiLU", function() return nn.SiLU{ foo = 1 } end, "foo" },
  { "nn.ReLU", function() return nn.ReLU{ inplce = true } end, "inplce" },
  { "nn.Tanh", function() return nn.Tanh{ x = 1 } end, "x" },
  { "nn.GELU", function() return nn.GELU{ aproximate = "tanh" } end, "aproximate" },
  { "nn.Identity", function() return nn.Identity{ unused = 1 } end, "unused" },
  { "nn.Linear", function() return nn.Linear(3, 2, { bais = false }) end, "bais" },
  { "nn.Bilinear", function() return nn.Bilinear(3, 2, 4, { biass = false }) end, "biass" },
  { "nn.Dropout", function() return nn.Dropout{ q = 0.1 } end, "q" },
  { "nn.LeakyReLU", function() return nn.LeakyReLU{ slope = 0.2 } end, "slope" },
  { "nn.Softmax", function() return nn.Softmax{ dim = -1, stable = true } end, "stable" },
  { "nn.PReLU", function() return nn.PReLU{ channels = 3 } end, "channels" },
  { "nn.Flatten", function() return nn.Flatten{ start = 1 } end, "start" },
  { "nn.Conv2d", function() return nn.Conv2d(1, 2, 3, { strides = 2 }) end, "strides" },
  { "nn.MaxPool2d", function() return nn.MaxPool2d(2, { strid = 2 }) end, "strid" },
  { "nn.BatchNorm1d", function() return nn.BatchNorm1d(4, { epsilon = 1e-3 }) end, "epsilon" },
  { "nn.LayerNorm", function() return nn.LayerNorm(4, { affine = false }) end, "affine" },
  { "nn.GroupNorm", function() return nn.GroupNorm(2, 4, { elementwise_affine = false }) end, "elementwise_affine" },
  { "nn.Embedding", function() return nn.Embedding(5, 2, { padding = 1 }) end, "padding" },
  { "nn.Embedding.from_pretrained", function() return nn.Embedding.from_pretrained(accel.ones(3, 2), { frozen = true }) end,
    "frozen" },
  { "nn.MultiheadAttention", function() return nn.MultiheadAttention(4, 2, { batchfirst = true }) end, "batchfirst" },
  { "nn.TransformerEncoderLayer", function() return nn.TransformerEncoderLayer(4, 2, { nhead = 2 }) end, "nhead" },
}
for _, case in ipairs(unknown) do
  check.raises(case[2], case[1] .. " refuses an unknown option", case[1] .. ":", "unknown option '" .. case[3] .. "'")
end
check.raises(function() nn.SiLU{ foo = 1 } end, "an option-less module says so", "it takes no options")
check.raises(function() nn.ReLU(true) end, "a non-table argument", "nn.ReLU", "options must be a table")

-- Values of the wrong type, naming the key.
local wrong_type = {
  { "nn.Linear", function() return nn.Linear(3, 2, { bias = "no" }) end, "'bias' must be a boolean" },
  { "nn.Linear", function() return nn.Linear(3, 2, "no") end, "a boolean bias, got a string" },
  { "nn.Conv1d", function() return nn.Conv1d(1, 2, 3, { bias = 0 }) end, "'bias' must be a boolean" },
  { "nn.LayerNorm", function() return nn.LayerNorm(4, { eps = "small" }) end, "'eps' must be a number" },
  { "nn.BatchNorm2d", function() return nn.BatchNorm2d(4, { affine = 1 }) end, "'affine' must be a boolean" },
  { "nn.MultiheadAttention", function() return nn.MultiheadAttention(4, 2, { dropout = "0.1" }) end,
    "'dropout' must be a number" },
  { "nn.ELU", function() return nn.ELU{ alpha = "1" } end, "'alpha' must be a number" },
  { "nn.Dropout", function() return nn.Dropout{ p = true } end, "'p' must be a number" },
}
for _, case in ipairs(wrong_type) do
  check.raises(case[2], case[1] .. " refuses a value of the wrong type", case[1] .. ":", case[3])
end

-- Linear without bias: only the weight.
do
  for _, lin in ipairs({ nn.Linear(3, 2, { bias = false }), nn.Linear(3, 2, false) }) do
    check.equal(lin.bias, nil, "Linear without bias has no bias")
    check.equal(#lin:parameters(), 1, "Linear without bias has 1 parameter")
    check.equal(lin:num_parameters(), 6, "Linear without bias has 6 numbers")
    local x = accel.randn(4, 3)
    check.near(lin(x), accel.matmul(x, lin.weight:t()), 1e-6, "Linear without bias computes x W^T")
    check.truthy(tostring(lin):find("no bias", 1, true), "Linear without bias says so")
  end
  for _, lin in ipairs({ nn.Linear(3, 2), nn.Linear(3, 2, { bias = true }), nn.Linear(3, 2, {}), nn.Linear(3, 2, true) }) do
    check.equal(#lin:parameters(), 2, "Linear with bias has 2 parameters")
  end
  check.equal(#nn.Bilinear(3, 2, 4, { bias = false }):parameters(), 1, "Bilinear{bias = false} has 1 parameter")
  check.equal(#nn.Bilinear(3, 2, 4, false):parameters(), 1, "Bilinear(..., false) has 1 parameter")
end

-- The options tables the other modules now take as well as their positional arguments.
do
  local x = accel.tensor({ -2, -0.5, 0, 1 }, { dtype = accel.float64 })
  check.near(nn.LeakyReLU{ negative_slope = 0.2 }(x), { -0.4, -0.1, 0, 1 }, 1e-12, "LeakyReLU{negative_slope}")
  check.near(nn.LeakyReLU(0.2)(x), { -0.4, -0.1, 0, 1 }, 1e-12, "LeakyReLU(0.2)")
  check.near(nn.Hardtanh{ max_val = 0.5 }(x), { -1, -0.5, 0, 0.5 }, 1e-12, "Hardtanh{max_val}")
  check.near(nn.Softmax{ dim = 1 }(x), F.softmax(x, 1), 1e-12, "Softmax{dim}")
  check.equal(nn.Dropout{ p = 0.25 }.p, 0.25, "Dropout{p}")
  check.equal(nn.Flatten{ start_dim = 1 }(accel.ones(2, 3)):dim(), 1, "Flatten{start_dim}")
  check.equal(nn.PReLU{ num_parameters = 3 }.weight:numel(), 3, "PReLU{num_parameters}")
  check.near(nn.PReLU{ init = 0.5 }(x:float()), { -1, -0.25, 0, 1 }, 1e-6, "PReLU{init}")
  check.raises(function() nn.ELU({ alpha = 1 }, 2) end, "both forms", "nn.ELU", "in order or as one options table")
  check.equal(nn.Identity{}(x), x, "Identity{} passes its input")
end

check.done("test_nn_options")
