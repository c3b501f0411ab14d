-- accel's 4-bit quantization equals bitsandbytes' byte for byte on real
-- weights (all-MiniLM-L6-v2's; make_quantize_reference.py): the packed
-- codes, the absmax, the quant maps and, with double quantization, the
-- nested statistics (for weights of more than 32768 blocks, such as the
-- word embeddings, the nested offset, a float32 mean, may differ by an ulp:
-- LibTorch 1.13 sums in another order than PyTorch 2.x); the dequantized weights equal bnb's exactly, and
-- Linear4bit's output equals bnb.nn.Linear4bit's within float32 rounding
-- (one product over in_features terms). Its backward sends gradients to the
-- input (equal to x's gradient through the dequantized weight) and none to
-- the codes.
--   accel-run quantize_parity.lua -- REFERENCE_DIR
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local core = require("accel.core")
local ck = core.formats
local dir = arg[1]
local f = assert(io.open(dir .. "/minilm_path.txt"))
local model_dir = f:read("*l")
f:close()
local ref = ck.read_safetensors(dir .. "/quantize_reference.safetensors")
local weights = ck.read_safetensors(model_dir .. "/model.safetensors")
weights.odd_slice = weights["encoder.layer.0.intermediate.dense.weight"]:narrow(1, 1, 37):narrow(2, 1, 51):contiguous()

local function same(a, b, what)
  check.truthy(a.dtype == b.dtype and a:numel() == b:numel() and a:reshape(-1):equal(b:reshape(-1)),
               what .. " equals bitsandbytes' (" .. tostring(a.dtype) .. " " .. a:numel() .. " vs "
               .. tostring(b.dtype) .. " " .. b:numel() .. ")")
end

-- Up to this many blocks the float32 mean of the absmax is summed as PyTorch 2.x sums it.
local MEAN_EXACT_UP_TO = 32768
local compared, linears, worst, large = 0, 0, 0, 0
for name in io.lines(dir .. "/names.txt") do
  local w = weights[name]
  for _, qt in ipairs({ "nf4", "fp4" }) do
    for _, dq in ipairs({ false, true }) do
      local key = string.format("%s|%s|%d", name, qt, dq and 1 or 0)
      local q = core.quant.quantize_4bit(w, { quant_type = qt, double_quant = dq })
      same(q.weight, ref[key .. "|codes"], key .. " codes")
      same(q.quant_map, ref[key .. "|quant_map"], key .. " quant_map")
      local ref_offset = dq and ref[key .. "|nested_offset"][1]:item()
      if dq and q.absmax:numel() > MEAN_EXACT_UP_TO then
        -- The offset is a float32 mean, whose sum LibTorch 1.13 and PyTorch 2.x
        -- take in another order above 32768 values (docs/api/finetuning.md).
        local ulps = math.abs(q.nested_offset - ref_offset) / (2 ^ -23 * math.abs(ref_offset))
        check.truthy(ulps <= 2, string.format("%s: nested_offset within 2 ulps of bitsandbytes' (%.1f)", key, ulps))
        local codes = q.absmax:ne(ref[key .. "|absmax"]):sum():item()
        check.truthy(codes <= 1e-4 * q.absmax:numel(), key .. ": the nested codes differ in " .. codes .. " places")
        local deq, expected = core.quant.dequantize_4bit(q), ref[key .. "|dequantized"]
        local d = ((deq - expected):abs():max() / expected:abs():max()):item()
        check.truthy(d <= 1e-2, key .. ": dequantized within one nested code of bitsandbytes': " .. d)
        large = large + 1
      else
        if dq then
          same(q.absmax, ref[key .. "|absmax"], key .. " absmax")
          same(q.nested_absmax, ref[key .. "|nested_absmax"], key .. " nested_absmax")
          same(q.nested_quant_map, ref[key .. "|nested_quant_map"], key .. " nested_quant_map")
          check.truthy(q.nested_offset == ref_offset, key .. " nested_offset equals")
        else
          same(q.absmax, ref[key .. "|absmax"], key .. " absmax")
          check.truthy(q.nested_absmax == nil, key .. ": no nested statistics without double quantization")
        end
        same(core.quant.dequantize_4bit(q), ref[key .. "|dequantized"], key .. " dequantized")
        compared = compared + 1
      end
      local out = ref[key .. "|linear_out"]
      if out then
        local linear = accel.nn.Linear(w:size(2), w:size(1))
        linear.weight = w:clone():requires_grad_()
        linear.bias = weights[name:gsub("weight$", "bias")]:clone():requires_grad_()
        local layer = accel.quantization.Linear4bit(linear, { quant_type = qt, double_quant = dq })
        local x = ref[w:size(2) .. "|x"]:clone():requires_grad_()
        local y = layer(x)
        local d = ((y - out):abs():max() / out:abs():max()):item()
        worst = math.max(worst, d)
        check.truthy(d <= 1e-6, string.format("%s: Linear4bit's output equals bnb.nn.Linear4bit's within %.1e "
                                              .. "(relative to its largest)", key, d))
        -- Backward: the input's gradient is g W, W decoded; the codes get none.
        local g = core.randn(y:size())
        y:backward(g)
        local expected = g:reshape(-1, w:size(1)):matmul(ref[key .. "|dequantized"]):reshape(x:size())
        local dg = ((x.grad - expected):abs():max() / expected:abs():max()):item()
        check.truthy(dg <= 1e-5, key .. ": the input's gradient is g W through the decoded weight: " .. dg)
        check.truthy(layer.weight.grad == nil and not layer.weight.requires_grad, key .. ": the codes get no gradient")
        check.truthy(layer.bias.grad ~= nil, key .. ": the bias gets its gradient")
        linears = linears + 1
      end
    end
  end
end
print(string.format("%d quantizations of MiniLM's weights equal bitsandbytes' byte for byte (%d of the embeddings' "
                    .. "183,132 blocks with nested statistics within one offset rounding); %d Linear4bit outputs "
                    .. "within %.1e of bnb.nn.Linear4bit's", compared, large, linears, worst))
check.truthy(compared >= 40 and linears >= 40, "every weight was compared")
check.done("quantize_parity")
