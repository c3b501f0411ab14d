-- nproc: 2
-- Gradient sync overlaps backward: with a model of more than 20 buckets,
-- the first bucket's all-reduce starts before backward has produced the
-- last gradient. The order comes from the reducer's own event record.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, F = accel.nn, accel.nn.functional

-- One 32x32 layer is 4 KiB of weights: a bucket per layer.
local acc = accel.Accelerator{ bucket_bytes = 4 * 1024 + 128 }
local layers = {}
for i = 1, 24 do layers[i] = nn.Linear(32, 32) end
local model = nn.Sequential(unpack(layers))
acc:prepare(model)
local reducer = acc._models[1].sync
check.truthy(reducer:num_buckets() >= 20, "at least 20 buckets, got " .. reducer:num_buckets())

acc:backward(F.mse_loss(model(accel.randn(8, 32)), accel.zeros(8, 32)))
local first_bucket, last_gradient
for i, event in ipairs(reducer:last_events()) do
  if event[1] == "bucket" and not first_bucket then first_bucket = i end
  if event[1] == "gradient" then last_gradient = i end
end
check.truthy(first_bucket and last_gradient, "events were recorded")
check.truthy(first_bucket < last_gradient, string.format(
  "the first all-reduce (event %d) starts before the last gradient (event %d)", first_bucket, last_gradient))
check.equal(#model:parameters(), 48, "every parameter reported a gradient")

check.done("test_gradient_overlap")
