-- tostring(t) prints as PyTorch 1.13's repr of the same tensor: every
-- expected string is `repr(...)` of the PyTorch expression beside it, with
-- `dtype=torch.X` spelt `dtype=accel.X`.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

local f32 = { dtype = accel.float32 }
local function prints(t, expected, what)
  check.equal(tostring(t), expected, what)
end

prints(accel.tensor({ { 1, 2 }, { 3, 4 } }, f32), "tensor([[1., 2.],\n        [3., 4.]])",
       "torch.tensor([[1., 2.], [3., 4.]])")
prints(accel.LongTensor({ 1, 2 }), "tensor([1, 2])", "torch.tensor([1, 2]): int64 needs no suffix")
prints(accel.tensor({ true, false }), "tensor([ True, False])", "torch.tensor([True, False])")
prints(accel.tensor(3.5), "tensor(3.5000)", "torch.tensor(3.5)")
prints(accel.tensor(0, f32), "tensor(0.)", "torch.tensor(0.)")
prints(accel.tensor(7, { dtype = accel.int64 }), "tensor(7)", "torch.tensor(7)")
prints(accel.tensor({ 0.5, -1.25, 2.0 }, { dtype = accel.float64 }),
       "tensor([ 0.5000, -1.2500,  2.0000], dtype=accel.float64)", "float64 with its dtype")
prints(accel.tensor({ 1e-5, 1.0 }), "tensor([1.0000e-05, 1.0000e+00])", "scientific for small values")
prints(accel.tensor({ 1e9, 1 }, f32), "tensor([1.0000e+09, 1.0000e+00])", "scientific for large values")
prints(accel.tensor({ 1, 2000 }, f32), "tensor([1.0000e+00, 2.0000e+03])", "scientific for a wide range")
prints(accel.tensor({ 123456.789, 0.001 }), "tensor([1.2346e+05, 1.0000e-03])", "scientific rounding")
prints(accel.tensor({ 0 / 0, 1 / 0, -1 / 0, 1.5 }), "tensor([   nan,    inf,   -inf, 1.5000])", "non-finite values")
prints(accel.tensor({ 0 / 0, 2 }, f32), "tensor([nan, 2.])", "nan among integral floats")
prints(accel.tensor({ -0.0 }, f32), "tensor([-0.])", "negative zero")
prints(accel.tensor({ 1, 2 }, { dtype = accel.int32 }), "tensor([1, 2], dtype=accel.int32)", "int32")
prints(accel.tensor({ 1.5, 2.25 }, { dtype = accel.bfloat16 }), "tensor([1.5000, 2.2500], dtype=accel.bfloat16)",
       "bfloat16")
prints(accel.tensor({ 1.5, 2.25 }, { dtype = accel.float16 }), "tensor([1.5000, 2.2500], dtype=accel.float16)",
       "float16")
prints(accel.zeros(0), "tensor([])", "torch.zeros(0)")
prints(accel.zeros(2, 0), "tensor([], size=(2, 0))", "torch.zeros(2, 0)")
prints(accel.zeros(0, { dtype = accel.int64 }), "tensor([], dtype=accel.int64)", "an empty int64 names its dtype")
prints(accel.arange(24):view(2, 3, 4), [=[
tensor([[[ 0,  1,  2,  3],
         [ 4,  5,  6,  7],
         [ 8,  9, 10, 11]],

        [[12, 13, 14, 15],
         [16, 17, 18, 19],
         [20, 21, 22, 23]]])]=], "torch.arange(24).view(2, 3, 4): a blank line between blocks")
prints(accel.arange(30) * 1000, [=[
tensor([    0,  1000,  2000,  3000,  4000,  5000,  6000,  7000,  8000,  9000,
        10000, 11000, 12000, 13000, 14000, 15000, 16000, 17000, 18000, 19000,
        20000, 21000, 22000, 23000, 24000, 25000, 26000, 27000, 28000, 29000])]=],
       "torch.arange(30) * 1000: lines wrap at 80 columns")
prints(accel.linspace(0, 1, 25), [=[
tensor([0.0000, 0.0417, 0.0833, 0.1250, 0.1667, 0.2083, 0.2500, 0.2917, 0.3333,
        0.3750, 0.4167, 0.4583, 0.5000, 0.5417, 0.5833, 0.6250, 0.6667, 0.7083,
        0.7500, 0.7917, 0.8333, 0.8750, 0.9167, 0.9583, 1.0000])]=], "torch.linspace(0, 1, 25)")
prints(accel.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])",
       "torch.arange(2000): more than 1000 elements are summarised")
prints(accel.arange(2000, f32):view(40, 50), [=[
tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,
         4.9000e+01],
        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,
         9.9000e+01],
        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,
         1.4900e+02],
        ...,
        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,
         1.8990e+03],
        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,
         1.9490e+03],
        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,
         1.9990e+03]])]=], "torch.arange(2000.).view(40, 50): summarised rows and columns")
prints(accel.ones(2, { requires_grad = true }), "tensor([1., 1.], requires_grad=True)", "requires_grad")
prints(accel.ones(2, { requires_grad = true }) * 2, "tensor([2., 2.], grad_fn=<MulBackward0>)", "grad_fn")
-- print() uses the same text
check.equal(tostring(accel.LongTensor({ 1, 2 })[2]), "tensor(2)", "a 0-dim view")

check.done("test_tensor_repr")
