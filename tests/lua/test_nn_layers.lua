-- nn.functional's layers against PyTorch 1.13 (float64). Inputs and weights
-- are seq(shape, a) = sin(a * (0, 1, 2, ...)) reshaped, the same on both
-- sides; each expected list was printed by /usr/bin/python3 (python3-torch
-- 1.13.1) for the call in its comment, with
--   def seq(shape, a): return torch.arange(prod(shape), dtype=torch.float64).mul(a).sin().reshape(shape)
--   print(out.flatten().tolist())
-- Python's 0-based ids, classes and indices are 1-based here.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local F = accel.nn.functional

local function seq(shape, a)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return accel.arange(n):double():mul(a):sin():view(shape)
end

local tol = 1e-8

-- F.conv1d(seq((1,2,6), .37), seq((3,2,3), .91), seq((3,), 1.3), stride=2, padding=1)
check.near(F.conv1d(seq({ 1, 2, 6 }, 0.37), seq({ 3, 2, 3 }, 0.91), seq({ 3 }, 1.3), { stride = 2, padding = 1 }),
           { -0.547485123, 1.708537399, 2.686310555, 1.231931959, 2.164827605, 1.296689813, 1.427915155, 0.4404232848, -1.717824241 }, tol, "conv1d")
-- F.conv2d(seq((1,2,4,4), .37), seq((2,1,3,3), .91), seq((2,), 1.3), stride=2, padding=1, groups=2)
check.near(F.conv2d(seq({ 1, 2, 4, 4 }, 0.37), seq({ 2, 1, 3, 3 }, 0.91), seq({ 2 }, 1.3),
                    { stride = { 2, 2 }, padding = 1, groups = 2 }),
           { 0.5367172695, -1.257358431, 0.8970755979, 2.195661485, 2.257776864, 2.769219965, -0.5794241915, -0.3322609935 }, tol, "conv2d with groups, stride and padding")
-- F.conv2d(seq((1,1,5,5), .23), seq((2,1,2,2), .71), None, padding='same', dilation=2).sum(dim=(2, 3))
local same = F.conv2d(seq({ 1, 1, 5, 5 }, 0.23), seq({ 2, 1, 2, 2 }, 0.71), nil, { padding = "same", dilation = 2 })
check.equal(table.concat(same.shape, "x"), "1x2x5x5", "padding 'same' keeps the size")
check.near(same:sum({ 3, 4 }), { 0.8028303407, 1.743298207 }, tol, "conv2d, padding 'same', dilation 2")

-- v, i = F.max_pool2d(seq((1,1,4,4), .77), 2, return_indices=True)
local values, indices = F.max_pool2d(seq({ 1, 1, 4, 4 }, 0.77), 2, { return_indices = true })
check.near(values, { 0.6961352386, 0.9995258306, 0.6026475684, 0.9881682339 }, tol, "max_pool2d")
check.near(indices, { 2, 3, 10, 11 }, 0, "max_pool2d indices are 1-based")
-- F.max_pool2d(seq((1,1,4,4), .77), 3, stride=2, padding=1, ceil_mode=True)
check.near(F.max_pool2d(seq({ 1, 1, 4, 4 }, 0.77), 3, { stride = 2, padding = 1, ceil_mode = true }),
           { 0.6961352386, 0.9995258306, 0.7390052781, 0.6026475684, 0.9881682339, 0.8161854685, 0.1837282786, -0.5523844855, -0.8502029171 }, tol, "max_pool2d with ceil_mode")
-- F.avg_pool2d(seq((1,1,5,5), .41), 3, stride=2, padding=1, count_include_pad=False)
check.near(F.avg_pool2d(seq({ 1, 1, 5, 5 }, 0.41), 3, { stride = 2, padding = 1, count_include_pad = false }),
           { 0.4790005817, 0.4720957955, 0.3202001314, -0.02332869846, -0.02399115557, -0.01728540745, 0.4522012334, 0.4855490407, 0.369774186 }, tol, "avg_pool2d")
-- F.adaptive_avg_pool2d(seq((1,1,5,7), .53), (2, 3))
check.near(F.adaptive_avg_pool2d(seq({ 1, 1, 5, 7 }, 0.53), { 2, 3 }),
           { 0.1848703242, 0.1727842218, -0.01593155978, 0.1634426681, -0.03176916165, -0.1945047805 }, tol, "adaptive_avg_pool2d")

-- rm, rv = seq((3,), .2), seq((3,), .3).abs() + .5
-- out = F.batch_norm(seq((4,3,2), .61), rm, rv, seq((3,), .9), seq((3,), 1.7), training=True, momentum=0.2, eps=1e-3)
do
  local x = seq({ 4, 3, 2 }, 0.61)
  local rm, rv = seq({ 3 }, 0.2), seq({ 3 }, 0.3):abs() + 0.5
  local w, b = seq({ 3 }, 0.9), seq({ 3 }, 1.7)
  local out = F.batch_norm(x, rm, rv, w, b, { training = true, momentum = 0.2, eps = 1e-3 })
  check.near(out[1], { 0, 0, 1.874578133, 1.905029502, 0.5032210889, -0.434380755 }, tol, "batch_norm in training normalises by the batch")
  check.near(rm, { -0.01992027574, 0.1873159824, 0.350960638 }, tol, "batch_norm updates running_mean in place")
  check.near(rv, { 0.5352105612, 0.7505288484, 0.927158261 }, tol, "batch_norm updates running_var (unbiased) in place")
  -- F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-3)[1]
  check.near(F.batch_norm(x, rm, rv, w, b, { eps = 1e-3 })[2], { 0, 0, -0.06851631854, 0.1785195353, -0.794440291, -0.1918456803 }, tol,
             "batch_norm in eval mode uses the running stats")
end
-- F.layer_norm(seq((2,3,4), .43), (3, 4), seq((3,4), .8), seq((3,4), .6), eps=1e-4)[1]
check.near(F.layer_norm(seq({ 2, 3, 4 }, 0.43), { 3, 4 }, seq({ 3, 4 }, 0.8), seq({ 3, 4 }, 0.6), { eps = 1e-4 })[2],
           { 0, -0.3954137803, 0.2006008503, 0.9405251053, 0.6413330121, -0.6571955986, -1.713212607, -1.63331579, -0.8958507903, -0.5341717669, -0.6470402616, -0.2929778694 }, tol, "layer_norm")
-- F.group_norm(seq((2,4,3), .47), 2, seq((4,), .8), seq((4,), .6))[0]
check.near(F.group_norm(seq({ 2, 4, 3 }, 0.47), 2, seq({ 4 }, 0.8), seq({ 4 }, 0.6))[1],
           { 0, 0, 0, 1.270997178, 1.198239214, 0.690123143, 2.722276676, 1.743397636, 0.8321755561, 0.4698601947, 0.307272534, 0.4538610536 }, tol, "group_norm")
-- F.normalize(seq((2,3), .7), p=1.0, dim=1)
check.near(F.normalize(seq({ 2, 3 }, 0.7), { p = 1, dim = 2 }), { 0, 0.3953062327, 0.6046937673, 0.5572757245, 0.2162635987, -0.2264606768 }, tol, "normalize")

-- wt = seq((5,3), .9) * 2; F.embedding(tensor([[4, 0], [2, 4]]), wt, padding_idx=1)
do
  local wt = seq({ 5, 3 }, 0.9) * 2
  local ids = accel.LongTensor({ { 5, 1 }, { 3, 5 } })
  check.near(F.embedding(ids, wt, { padding_idx = 2 }), { -1.96187246, -1.523967168, 0.06724609444, 0, 1.566653819, 1.947695262, -1.545528975, 0.03362780097, 1.587335728, -1.96187246, -1.523967168, 0.06724609444 }, tol, "embedding with 1-based ids")
  -- F.embedding(ids, wt, max_norm=1.0) renormalises the rows it looks up, in place
  F.embedding(ids, wt, { max_norm = 1.0 })
  check.near(wt, { 0, 0.6267657539, 0.7792076808, 0.8547597605, -0.8850408866, -1.955060235, -0.69752825, 0.01517690159, 0.7163964767, 1.939779622, 0.8242369705, -0.9150717876, -0.7894400694, -0.6132308655, 0.0270592317 }, tol, "embedding max_norm renormalises looked-up rows")
end
-- F.one_hot(tensor([2, 0, 1]), 4)
check.near(F.one_hot(accel.LongTensor({ 3, 1, 2 }), 4), { 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0 }, 0, "one_hot with 1-based classes")
check.equal(F.one_hot(accel.LongTensor({ 3, 1 })):size(2), 3, "one_hot's classes default to the largest id")
-- F.bilinear(seq((2,3), .3), seq((2,4), .5), seq((2,3,4), .7), seq((2,), .9))
check.near(F.bilinear(seq({ 2, 3 }, 0.3), seq({ 2, 4 }, 0.5), seq({ 2, 3, 4 }, 0.7), seq({ 2 }, 0.9)),
           { 0.3172273941, 1.059260546, -0.3472591183, 1.933446692 }, tol, "bilinear")

-- q, k, v = seq((2,3,4), .3), seq((2,5,4), .5), seq((2,5,6), .7)
-- torch.softmax(q @ k.transpose(-2, -1) / 2 + seq((3,5), 1.1), -1) @ v
do
  local q, k, v = seq({ 2, 3, 4 }, 0.3), seq({ 2, 5, 4 }, 0.5), seq({ 2, 5, 6 }, 0.7)
  check.near(F.scaled_dot_product_attention(q, k, v, { attn_mask = seq({ 3, 5 }, 1.1) }),
             { -0.200323168, -0.02050600769, 0.1689554484, 0.2789545171, 0.2577569177, 0.1153322122, -0.3256397653, -0.07389319312, 0.2126065024, 0.3991140377, 0.3979120048, 0.2095657385, -0.2598049015, -0.134785006, 0.05362638398, 0.2168164476, 0.2780343481, 0.2084883502, 0.5053070903, 0.242709439, -0.1340382539, -0.4477456616, -0.5508712884, -0.3949135407, 0.5359931787, 0.259893111, -0.1384387477, -0.4716607002, -0.5830532555, -0.4202267543, 0.03849327181, 0.1026936352, 0.1185955774, 0.07872016638, 0.001821431087, -0.07593395171 }, tol, "scaled_dot_product_attention with a float mask")
  -- kk, vv = seq((2,3,4), .5), seq((2,3,6), .7); scores masked_fill(ones(3,3).triu(1), -inf)
  local kk, vv = seq({ 2, 3, 4 }, 0.5), seq({ 2, 3, 6 }, 0.7)
  local causal = { 0, 0.6442176872, 0.98544973, 0.8632093666, 0.3349881502, -0.3507832277, -0.3414701113, 0.006913042181, 0.3520448839, 0.5316045158, 0.4611422374, 0.1737975592, -0.2619380133, -0.2046629815, -0.05113175154, 0.1264475401, 0.2445565779, 0.2476468358, 0.03362304722, 0.6695697622, 0.9906073557, 0.8457468311, 0.3031183567, -0.3820714172, -0.3080325091, 0.05939137782, 0.3988825717, 0.5507730594, 0.4436263712, 0.1278352688, -0.0527930828, 0.1035640148, 0.211213338, 0.219525728, 0.124591738, -0.02893969321 }
  check.near(F.scaled_dot_product_attention(q, kk, vv, { is_causal = true }), causal, tol,
             "scaled_dot_product_attention, causal")
  -- A boolean attn_mask is true where attention is allowed (PyTorch 2's convention).
  local allowed = accel.tensor({ { true, false, false }, { true, true, false }, { true, true, true } })
  check.near(F.scaled_dot_product_attention(q, kk, vv, { attn_mask = allowed }), causal, tol,
             "scaled_dot_product_attention with a boolean mask")
  -- torch.softmax(q @ kk.transpose(-2, -1) * 0.1, -1) @ vv
  check.near(F.scaled_dot_product_attention(q, kk, vv, { scale = 0.1 }), { -0.04165874332, 0.0126235791, 0.06096883501, 0.08063949516, 0.0623841407, 0.01478855009, -0.1197293528, -0.02769222369, 0.07736899095, 0.1460423602, 0.1460297255, 0.07733702911, -0.05985510051, -0.04454007225, -0.008277152058, 0.03187864208, 0.05704141274, 0.05537671568, 0.1086455453, 0.02893097495, -0.06439028501, -0.1274277878, -0.1305340109, -0.07224804899, 0.1289663356, 0.06055002089, -0.0363439148, -0.1161447395, -0.1413208784, -0.1000316, -0.0179065056, 0.01238676347, 0.03685434413, 0.04398875088, 0.03043456075, 0.002566521146 }, tol,
             "scaled_dot_product_attention with a scale")
  check.near(F.scaled_dot_product_attention(q, kk, vv, { dropout_p = 0.9, training = false }),
             F.scaled_dot_product_attention(q, kk, vv), 0, "no dropout when not training")
end

-- nn.MultiheadAttention(8, 2, batch_first=True) with in_proj_weight seq((24,8), .13), in_proj_bias
-- seq((24,), .29), out_proj.weight seq((8,8), .17), out_proj.bias seq((8,), .31);
-- o, w = mha(seq((2,3,8), .21), seq((2,4,8), .33), seq((2,4,8), .45),
--            key_padding_mask=[[F, F, F, T], [F, T, F, F]], attn_mask=seq((3,4), .9))
do
  local w_in, b_in, w_out, b_out = seq({ 24, 8 }, 0.13), seq({ 24 }, 0.29), seq({ 8, 8 }, 0.17), seq({ 8 }, 0.31)
  local query, key, value = seq({ 2, 3, 8 }, 0.21), seq({ 2, 4, 8 }, 0.33), seq({ 2, 4, 8 }, 0.45)
  local padding = accel.tensor({ { false, false, false, true }, { false, true, false, false } })
  local out, weights = F.multi_head_attention(query, key, value, 2, w_in, b_in, w_out, b_out,
                                              { key_padding_mask = padding, attn_mask = seq({ 3, 4 }, 0.9) })
  check.near(out, { 2.136152129, 1.008265051, -1.260841025, -0.6723699048, 2.170828847, 2.986427109, 0.5647916415, -1.325604358, 2.136150252, 1.008269426, -1.260837316, -0.6723727279, 2.170823957, 2.986427886, 0.5647968565, -1.325602952, -5.735343642, -9.71395667, 2.12364801, 11.46618376, 3.866049361, -8.442715195, -5.913265848, 7.392617733, -4.191428403, -8.071800792, 1.266937781, 9.465514068, 3.885524676, -6.433895528, -5.092095669, 5.727439171, 2.465848489, 0.3909810264, -1.848856756, -0.3011571349, 2.914188708, 2.92629359, -0.2037327337, -1.587080869, 2.420420043, 0.2414130703, -1.866019109, -0.1587712343, 2.990936332, 2.816024831, -0.3266253344, -1.528239877 }, 1e-7, "multi_head_attention output")
  check.near(weights, { 1.359167853e-07, 0.9999995864, 2.777124444e-07, 0, 1.358488193e-11, 0.9999999906, 9.390668525e-09, 0, 0.5087123516, 8.171710698e-07, 0.4912868312, 0, 7.236262803e-05, 0, 2.464690853e-06, 0.9999251727, 6.437791191e-05, 0, 0.9999356218, 2.767028746e-10, 0.03721155155, 0, 0.9627850272, 3.421218714e-06 }, 1e-7, "multi_head_attention averaged weights")
  -- o, w = mha(q, q, q, attn_mask=ones(3,3, dtype=bool).triu(1), average_attn_weights=False); w[:, 1]
  local blocked = accel.tensor({ { false, true, true }, { false, false, true }, { false, false, false } })
  out, weights = F.multi_head_attention(query, query, query, 2, w_in, b_in, w_out, b_out,
                                        { attn_mask = blocked, average_attn_weights = false })
  check.near(out, { -4.570401467, -7.910625359, 1.713359111, 9.491155842, 3.449833847, -6.641864038, -4.743434947, 6.08131429, -4.287077658, -8.676796499, 1.109410047, 10.00458799, 4.268642627, -6.812643272, -5.633710965, 5.879533192, -4.573866781, -7.910535012, 1.716862233, 9.492531472, 3.446906395, -6.64446474, -4.74159583, 6.084684621, 1.702459371, 0.535952022, -1.024800563, -0.1012792934, 2.17377686, 2.416570174, 0.3233714188, -0.8567763137, 1.702499393, 0.5359100928, -1.024858131, -0.1012614551, 2.173841893, 2.416579551, 0.3233103099, -0.8568112628, -0.5253650414, -0.05857063382, 0.9542295952, 1.321422622, 0.790115204, 0.4148372205, 0.8693532097, 1.373437643 }, 1e-7, "self-attention with a boolean attn_mask")
  check.near(weights:select(2, 2), { 1, 0, 0, 0.0003205497905, 0.9996794502, 0, 0.9999465598, 5.344022815e-05, 8.016756643e-19, 1, 0, 0, 0.9999999377, 6.226643853e-08, 0, 0.5849420545, 0.0005783018777, 0.4144796436 }, 1e-7, "per-head weights")
  local causal = F.multi_head_attention(query, query, query, 2, w_in, b_in, w_out, b_out,
                                        { is_causal = true, need_weights = false })
  check.near(causal, out, 1e-12, "is_causal is the boolean triangle")
  local unbatched = F.multi_head_attention(query[2], query[2], query[2], 2, w_in, b_in, w_out, b_out,
                                           { is_causal = true, need_weights = false })
  check.near(unbatched, out[2], 1e-12, "unbatched (L, E) input")
end
-- nn.MultiheadAttention(4, 2, batch_first=True, kdim=3, vdim=5): q/k/v_proj_weight seq((4,4), .13),
-- seq((4,3), .19), seq((4,5), .23), in_proj_bias seq((12,), .29), out_proj seq((4,4), .17), seq((4,), .31);
-- mha(seq((1,2,4), .2), seq((1,3,3), .4), seq((1,3,5), .6))[0]
check.near(F.multi_head_attention(seq({ 1, 2, 4 }, 0.2), seq({ 1, 3, 3 }, 0.4), seq({ 1, 3, 5 }, 0.6), 2, nil,
                                  seq({ 12 }, 0.29), seq({ 4, 4 }, 0.17), seq({ 4 }, 0.31),
                                  { q_proj_weight = seq({ 4, 4 }, 0.13), k_proj_weight = seq({ 4, 3 }, 0.19),
                                    v_proj_weight = seq({ 4, 5 }, 0.23) }),
           { 0.9684310007, 2.352168547, 2.796157798, 2.199347893, 0.7797171443, 0.8254834047, 0.6106542202, 0.3272571181 }, 1e-7, "multi_head_attention with kdim and vdim")

-- F.pad(seq((1,1,3,3), .5), (1, 2, 0, 1), mode=m) (value=0.5 for 'constant')
do
  local x = seq({ 1, 1, 3, 3 }, 0.5)
  check.near(F.pad(x, { 1, 2, 0, 1 }, { value = 0.5 }), { 0.5, 0, 0.4794255386, 0.8414709848, 0.5, 0.5, 0.5, 0.9974949866, 0.9092974268, 0.5984721441, 0.5, 0.5, 0.5, 0.1411200081, -0.3507832277, -0.7568024953, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5 }, tol, "pad constant")
  check.near(F.pad(x, { 1, 2, 0, 1 }, { mode = "reflect" }), { 0.4794255386, 0, 0.4794255386, 0.8414709848, 0.4794255386, 0, 0.9092974268, 0.9974949866, 0.9092974268, 0.5984721441, 0.9092974268, 0.9974949866, -0.3507832277, 0.1411200081, -0.3507832277, -0.7568024953, -0.3507832277, 0.1411200081, 0.9092974268, 0.9974949866, 0.9092974268, 0.5984721441, 0.9092974268, 0.9974949866 }, tol, "pad reflect")
  check.near(F.pad(x, { 1, 2, 0, 1 }, { mode = "replicate" }), { 0, 0, 0.4794255386, 0.8414709848, 0.8414709848, 0.8414709848, 0.9974949866, 0.9974949866, 0.9092974268, 0.5984721441, 0.5984721441, 0.5984721441, 0.1411200081, 0.1411200081, -0.3507832277, -0.7568024953, -0.7568024953, -0.7568024953, 0.1411200081, 0.1411200081, -0.3507832277, -0.7568024953, -0.7568024953, -0.7568024953 }, tol,
             "pad replicate")
  check.near(F.pad(x, { 1, 2, 0, 1 }, { mode = "circular" }), { 0.8414709848, 0, 0.4794255386, 0.8414709848, 0, 0.4794255386, 0.5984721441, 0.9974949866, 0.9092974268, 0.5984721441, 0.9974949866, 0.9092974268, -0.7568024953, 0.1411200081, -0.3507832277, -0.7568024953, 0.1411200081, -0.3507832277, 0.8414709848, 0, 0.4794255386, 0.8414709848, 0, 0.4794255386 }, tol, "pad circular")
end

-- x = torch.linspace(-4, 4, 9, dtype=torch.float64); each activation's call in its line
do
  local x = accel.linspace(-4, 4, 9, { dtype = accel.float64 })
  check.near(F.leaky_relu(x, 0.2), { -0.8, -0.6, -0.4, -0.2, 0, 1, 2, 3, 4 }, tol, "leaky_relu(x, 0.2)")
  check.near(F.elu(x, 0.5), { -0.4908421806, -0.4751064658, -0.4323323584, -0.3160602794, 0, 1, 2, 3, 4 }, tol, "elu(x, 0.5)")
  check.near(F.celu(x, 2.0), { -1.729329434, -1.55373968, -1.264241118, -0.7869386806, 0, 1, 2, 3, 4 }, tol, "celu(x, 2.0)")
  check.near(F.selu(x), { -1.725898628, -1.670568729, -1.520166469, -1.111330738, 0, 1.050700987, 2.101401975, 3.152102962, 4.202803949 }, tol, "selu(x)")
  check.near(F.softplus(x, 2.0, 1.0), { 0.0001677031864, 0.001237842569, 0.009074963959, 0.06346400552, 0.3465735903, 1, 2, 3, 4 }, tol, "softplus(x, 2.0, 1.0)")
  check.near(F.hardtanh(x, -0.5, 0.5), { -0.5, -0.5, -0.5, -0.5, 0, 0.5, 0.5, 0.5, 0.5 }, tol, "hardtanh(x, -0.5, 0.5)")
  check.near(F.relu6(x * 2), { 0, 0, 0, 0, 0, 2, 4, 6, 6 }, tol, "relu6(x * 2)")
  check.near(F.mish(x), { -0.07259174079, -0.1456474613, -0.2525014827, -0.3034014614, 0, 0.8650983883, 1.94395896, 2.986535005, 3.997412807 }, tol, "mish(x)")
  check.near(F.hardswish(x), { -0, -0, -0.3333333333, -0.3333333333, 0, 0.6666666667, 1.666666667, 3, 4 }, tol, "hardswish(x)")
  check.near(F.hardsigmoid(x), { 0, 0, 0.1666666667, 0.3333333333, 0.5, 0.6666666667, 0.8333333333, 1, 1 }, tol, "hardsigmoid(x)")
  check.near(F.logsigmoid(x), { -4.018149928, -3.048587352, -2.126928011, -1.313261688, -0.6931471806, -0.3132616875, -0.126928011, -0.04858735157, -0.01814992792 }, tol, "logsigmoid(x)")
  check.near(F.softsign(x), { -0.8, -0.75, -0.6666666667, -0.5, 0, 0.5, 0.6666666667, 0.75, 0.8 }, tol, "softsign(x)")
  check.near(F.prelu(x:view(1, 9), accel.tensor({ 0.3 }, { dtype = accel.float64 })), { -1.2, -0.9, -0.6, -0.3, 0, 1, 2, 3, 4 }, tol,
             "prelu(x.reshape(1, 9), tensor([0.3]))")
end

do
  local x = seq({ 1, 2, 3, 4 }, 0.3)
  check.near(F.adaptive_avg_pool2d(x, 1):view(2), x:mean({ 3, 4 }):view(2), 1e-12,
             "adaptive_avg_pool2d with one number for both dims")
  local w = seq({ 2, 2, 3, 3 }, 0.4)
  check.raises(function() F.conv2d(x, w, nil, { strid = 2 }) end, "unknown option", "conv2d",
               "unknown option 'strid'", "stride")
  check.raises(function() F.conv2d(x, w, nil, { stride = "2" }) end, "bad option type", "option 'stride'")
  check.raises(function() F.conv2d(x, w, nil, { stride = 1.5 }) end, "a fractional stride", "option 'stride'",
               "integer")
  check.raises(function() F.max_pool2d(x, 2, { padding = { 0, 0.5 } }) end, "a fractional padding",
               "option 'padding'", "integer")
  check.raises(function() F.pad(x, { 1, 1 }, { mode = "mirror" }) end, "bad pad mode", "mirror")
  check.raises(function() F.batch_norm(x, nil, nil, nil, nil) end, "eval without stats", "running_mean")
  check.raises(function() F.one_hot(accel.LongTensor({ 0, 2 }), 3) end, "class 0", "one_hot", "id 0")
  check.raises(function() F.embedding(accel.LongTensor({ 1 }), w) end, "3-D weight", "2-D weight", "[2, 2, 3, 3]")
  check.raises(function() F.scaled_dot_product_attention(x, x, x, { is_causal = true, attn_mask = x }) end,
               "mask and causal", "not both")
end

check.done("test_nn_layers")
