-- Shape ops and selection by index tensors and masks, with 1-based dims,
-- positions and indices. Expected values are hand-computed.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

local t = accel.arange(1, 7):view(2, 3)  -- {{1, 2, 3}, {4, 5, 6}}

-- views and reshapes
check.near(t:view(3, 2), { { 1, 2 }, { 3, 4 }, { 5, 6 } }, 0, "view")
check.near(t:view(-1), { 1, 2, 3, 4, 5, 6 }, 0, "view(-1)")
check.near(t:reshape({ 3, 2 }):size(), { 3, 2 }, 0, "reshape with a table")
check.near(t:t():reshape(6), { 1, 4, 2, 5, 3, 6 }, 0, "reshape of a transpose copies")
check.near(accel.zeros(6):view_as(t):size(), { 2, 3 }, 0, "view_as")
check.near(t:transpose(1, 2), { { 1, 4 }, { 2, 5 }, { 3, 6 } }, 0, "transpose")
check.near(accel.zeros(2, 3, 4):permute(3, 1, 2):size(), { 4, 2, 3 }, 0, "permute with trailing dims")
check.near(accel.zeros(2, 3, 4):movedim(1, -1):size(), { 3, 4, 2 }, 0, "movedim")
check.near(accel.zeros(1, 3, 1):squeeze():size(), { 3 }, 0, "squeeze")
check.near(accel.zeros(1, 3, 1):squeeze(3):size(), { 1, 3 }, 0, "squeeze(3)")
check.near(t:unsqueeze(-1):size(), { 2, 3, 1 }, 0, "unsqueeze(-1) adds a last dim")
check.near(accel.zeros(2, 3, 4):flatten(2):size(), { 2, 12 }, 0, "flatten from dim 2")
check.near(accel.zeros(2, 12):unflatten(2, { 3, 4 }):size(), { 2, 3, 4 }, 0, "unflatten")
check.near(accel.tensor({ 5, 7 }):expand(2, 2), { { 5, 7 }, { 5, 7 } }, 0, "expand")
check.near(accel.tensor({ { 5 }, { 7 } }):expand_as(t), { { 5, 5, 5 }, { 7, 7, 7 } }, 0, "expand_as")
check.equal(t:transpose(1, 2):is_contiguous(), false, "a transpose is a strided view")
check.equal(t:transpose(1, 2):contiguous():is_contiguous(), true, "contiguous")

-- positions
check.near(t:narrow(2, 2, 2), { { 2, 3 }, { 5, 6 } }, 0, "narrow from position 2")
check.near(t:narrow(2, -1, 1), { { 3 }, { 6 } }, 0, "narrow from the last position")
check.near(t:select(2, 3), { 3, 6 }, 0, "select")
check.near(t:select(1, -1), { 4, 5, 6 }, 0, "select(-1)")

-- joining and splitting; pieces come back in a Lua array
check.near(accel.cat({ t, t }, 2), { { 1, 2, 3, 1, 2, 3 }, { 4, 5, 6, 4, 5, 6 } }, 0, "cat along dim 2")
check.near(accel.cat({ t, t }), accel.cat({ t, t }, 1), 0, "cat defaults to dim 1")
check.near(accel.stack({ t, t }, 3):size(), { 2, 3, 2 }, 0, "stack along a new last dim")
local pieces = t:split(2, 2)
check.equal(#pieces, 2, "split(2, 2) gives two pieces")
check.near(pieces[1], { { 1, 2 }, { 4, 5 } }, 0, "split first piece")
check.near(pieces[2], { { 3 }, { 6 } }, 0, "split last piece is smaller")
pieces = accel.arange(6):split({ 1, 2, 3 })
check.near(pieces[3], { 3, 4, 5 }, 0, "split by sizes")
pieces = accel.arange(6):chunk(3)
check.equal(#pieces, 3, "chunk(3)")
check.near(pieces[2], { 2, 3 }, 0, "chunk pieces")
pieces = t:unbind(2)
check.equal(#pieces, 3, "unbind(2)")
check.near(pieces[3], { 3, 6 }, 0, "unbind pieces")

-- `repeat` is a Lua keyword, so PyTorch's repeat is spelled tile (torch.tile).
check.near(accel.tensor({ 1, 2 }):tile(2, 2), { { 1, 2, 1, 2 }, { 1, 2, 1, 2 } }, 0, "tile")
check.near(t:tile(2), { { 1, 2, 3, 1, 2, 3 }, { 4, 5, 6, 4, 5, 6 } }, 0, "tile with fewer repeats than dims")
check.near(accel.tensor({ 1, 2 }):repeat_interleave(2), { 1, 1, 2, 2 }, 0, "repeat_interleave")
check.near(t:flip(2), { { 3, 2, 1 }, { 6, 5, 4 } }, 0, "flip(2)")
check.near(t:flip(1, 2), { { 6, 5, 4 }, { 3, 2, 1 } }, 0, "flip(1, 2)")
check.near(t:roll(1, 2), { { 3, 1, 2 }, { 6, 4, 5 } }, 0, "roll along dim 2")
check.near(t:roll(1), { { 6, 1, 2 }, { 3, 4, 5 } }, 0, "roll the flattened tensor")
local sq = accel.arange(1, 10):view(3, 3)
check.near(sq:tril(), { { 1, 0, 0 }, { 4, 5, 0 }, { 7, 8, 9 } }, 0, "tril")
check.near(sq:tril(-1), { { 0, 0, 0 }, { 4, 0, 0 }, { 7, 8, 0 } }, 0, "tril(-1) drops the diagonal")
check.near(sq:triu(1), { { 0, 2, 3 }, { 0, 0, 6 }, { 0, 0, 0 } }, 0, "triu(1)")
check.near(sq:diag(), { 1, 5, 9 }, 0, "diag")
check.near(accel.tensor({ 1, 2 }):diag(), { { 1, 0 }, { 0, 2 } }, 0, "diag of a vector")

-- index tensors are 1-based
check.near(t:index_select(2, accel.LongTensor({ 3, 1 })), { { 3, 1 }, { 6, 4 } }, 0, "index_select")
local idx = accel.LongTensor({ { 3, 1 }, { 2, 2 } })
check.near(t:gather(2, idx), { { 3, 1 }, { 5, 5 } }, 0, "gather along dim 2")
check.near(t:gather(1, accel.LongTensor({ { 2, 1, 2 } })), { { 4, 2, 6 } }, 0, "gather along dim 1")
local z = accel.zeros(2, 3, { dtype = accel.int64 })
check.near(z:scatter(2, idx, accel.LongTensor({ { 7, 8 }, { 9, 10 } })), { { 8, 0, 7 }, { 0, 10, 0 } }, 0,
           "scatter writes (the last write wins)")
check.near(z:scatter(2, idx, 5), { { 5, 0, 5 }, { 0, 5, 0 } }, 0, "scatter a number")
check.near(z:scatter_add(2, idx, accel.LongTensor({ { 7, 8 }, { 9, 10 } })), { { 8, 0, 7 }, { 0, 19, 0 } }, 0,
           "scatter_add adds repeated positions")
check.near(z, { { 0, 0, 0 }, { 0, 0, 0 } }, 0, "scatter and scatter_add copy")
check.truthy(rawequal(z:scatter_add_(2, idx, accel.ones(2, 2, { dtype = accel.int64 })), z), "scatter_add_ in place")
check.near(z, { { 1, 0, 1 }, { 0, 2, 0 } }, 0, "scatter_add_")
z:scatter_(1, accel.LongTensor({ { 2, 2, 2 } }), 9)
check.near(z, { { 1, 0, 1 }, { 9, 9, 9 } }, 0, "scatter_ a number")
check.near(accel.zeros(3):index_add(1, accel.LongTensor({ 1, 3, 1 }), accel.tensor({ 1, 2, 3 })), { 4, 0, 2 }, 0,
           "index_add")
check.near(accel.zeros(3):index_copy(1, accel.LongTensor({ 3, 1 }), accel.tensor({ 1, 2 })), { 2, 0, 1 }, 0,
           "index_copy")
check.near(accel.zeros(2, 2):index_fill(2, accel.LongTensor({ 2 }), -1), { { 0, -1 }, { 0, -1 } }, 0, "index_fill")
check.near(t:masked_fill(t:gt(4), 0), { { 1, 2, 3 }, { 4, 0, 0 } }, 0, "masked_fill")
check.near(t:masked_fill(accel.tensor({ true, false, true }), -1), { { -1, 2, -1 }, { -1, 5, -1 } }, 0,
           "masked_fill broadcasts the mask")
local m = t:clone()
check.truthy(rawequal(m:masked_fill_(m:lt(3), 0), m), "masked_fill_ in place")
check.near(m, { { 0, 0, 3 }, { 4, 5, 6 } }, 0, "masked_fill_")
check.near(t:masked_select(t:gt(4)), { 5, 6 }, 0, "masked_select")
check.near(accel.tensor({ { 0, 3 }, { 5, 0 } }):nonzero(), { { 1, 2 }, { 2, 1 } }, 0, "nonzero is 1-based")
check.near(t:fill_(0), { { 0, 0, 0 }, { 0, 0, 0 } }, 0, "fill_")
t = accel.arange(1, 7):view(2, 3)

-- Bad calls name the function and the offending value.
check.raises(function() return t:index_select(2, accel.LongTensor({ 4 })) end, "index past the end",
             "accel.index_select", "argument 3 (index)", "index 4 is out of range for dim 2 of size 3")
check.raises(function() return t:gather(2, accel.LongTensor({ { 0, 1 } })) end, "index 0", "accel.gather",
             "argument 3 (index)", "index 0", "1-based")
check.raises(function() return t:gather(2, accel.tensor({ { 1.5, 2 } })) end, "float index", "accel.gather",
             "integer tensor", "float32", "accel.int64")
check.raises(function() return t:scatter(1, accel.LongTensor({ { 3 } }), 1) end, "scatter past the end",
             "accel.scatter", "index 3 is out of range for dim 1 of size 2")
check.raises(function() return t:narrow(2, 3, 2) end, "narrow past the end", "accel.narrow",
             "length 2 from position 3", "size 3")
check.raises(function() return t:narrow(2, 4, 1) end, "narrow start past the end", "accel.narrow", "index 4")
check.raises(function() return t:select(1, 3) end, "select past the end", "accel.select",
             "index 3 is out of range for dim 1 of size 2")
check.raises(function() return t:view(4, 2) end, "bad view", "accel.view", "int64[2, 3]", "4")
check.raises(function() return t:transpose(1, 3) end, "transpose dim", "accel.transpose", "dim 3 is out of range")
check.raises(function() return t:permute({ 1, 0 }) end, "permute dim 0", "accel.permute", "1-based")
check.raises(function() return t:masked_fill(t, 0) end, "mask must be bool", "accel.masked_fill", "int64[2, 3]")
check.raises(function() return accel.cat({ t, accel.ones(3) }) end, "cat shapes", "accel.cat")
check.raises(function() return accel.cat({ t, 5 }) end, "cat element type", "accel.cat", "element 2", "number")
check.raises(function() return t:split("2") end, "split size type", "accel.split", "string '2'")

check.done("test_tensor_shape")
