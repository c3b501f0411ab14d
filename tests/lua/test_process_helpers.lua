-- nproc: 2 3
-- PartialState and the Accelerator's process helpers: split_between_processes
-- (empty shares, padding, nested tables, data sets), reduce with every
-- reduction, the on_* helpers, rng state synchronisation, and nested
-- collectives still pairing keys. Run at 2 and 3 ranks (tests/CMakeLists.txt).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local data = accel.data
local state = accel.PartialState()
local acc = accel.Accelerator()
local R, r = state.num_processes, state.process_index

-- Process facts, the same on the Accelerator and its state.
check.equal(acc.state.process_index, r, "acc.state")
for _, name in ipairs({ "process_index", "local_process_index", "num_processes", "is_main_process",
                        "is_local_main_process", "is_last_process", "device", "distributed_type" }) do
  check.equal(acc[name], state[name], "fact " .. name)
end
check.equal(state.is_last_process, r == R - 1, "is_last_process")
check.equal(state.backend, "gloo", "backend")

-- Shares of n items: sizes differ by at most one, the first ranks taking the extra.
local function expected_share(n)
  local base, extra = math.floor(n / R), n % R
  local start = r * base + math.min(r, extra)
  return start, base + (r < extra and 1 or 0), base + (extra > 0 and 1 or 0)
end

-- Fewer items than ranks: an empty share is valid (defect 3).
local n = R - 1
local items, rows = {}, {}
for i = 1, n do items[i] = "item" .. i; rows[i] = { i * 1.0, i * 10.0 } end
local t = accel.tensor(rows, { dtype = accel.float32 })
local start, count, longest = expected_share(n)
local list = state:split_between_processes(items)
check.equal(#list, count, "list share size")
for i = 1, count do check.equal(list[i], items[start + i], "list share item") end
local part = acc:split_between_processes(t)
check.equal(part:size(1), count, "tensor share rows")
check.equal(part:size(2), 2, "tensor share columns")
if count > 0 then check.near(part, t:narrow(1, start + 1, count), 0, "tensor share") end
check.equal(#state:split_between_processes({}), 0, "share of an empty list")

-- apply_padding repeats the input's last element.
local padded = state:split_between_processes(items, { apply_padding = true })
check.equal(#padded, longest, "padded list size")
for i = count + 1, longest do check.equal(padded[i], items[n], "padded with the last item") end
local padded_t = state:split_between_processes(t, { apply_padding = true })
check.equal(padded_t:size(1), longest, "padded tensor rows")
for i = count + 1, longest do check.near(padded_t[i], t[n], 0, "padded with the last row") end
-- 2 + R*... items: every rank but the last few gets one more; padding
-- always repeats the input's last element, not the share's.
local many = {}
for i = 1, 2 * R + 1 do many[i] = i end
local s2, c2, l2 = expected_share(#many)
local pm = state:split_between_processes(many, { apply_padding = true })
check.equal(#pm, l2, "padded share of many")
for i = 1, c2 do check.equal(pm[i], s2 + i, "share of many") end
for i = c2 + 1, l2 do check.equal(pm[i], #many, "padding of many") end

-- Nested tables split alike, and data sets become subsets.
local ys = {}
for i = 1, 2 * R + 1 do ys[i] = i * 100 end
local xt = accel.arange(1, 2 * R + 2, { dtype = accel.float32 })
local nested = state:split_between_processes({ ids = many, labels = ys, x = xt }, { apply_padding = true })
check.equal(#nested.ids, l2, "nested ids")
check.equal(#nested.labels, l2, "nested labels")
check.equal(nested.x:size(1), l2, "nested tensor")
for i = 1, l2 do
  check.equal(nested.labels[i], nested.ids[i] * 100, "nested values stay paired")
  check.near(nested.x[i], nested.ids[i], 0, "nested tensor rows stay paired")
end
check.raises(function() state:split_between_processes({ a = { 1, 2 }, b = { 1 } }) end,
             "nested lengths", "same length")
check.raises(function() state:split_between_processes(items, { padding = true }) end,
             "unknown option", "unknown option 'padding'")
local ds = data.TensorDataset(xt, xt * 2)
local sub = state:split_between_processes(ds, { apply_padding = true })
check.equal(#sub.indices:totable(), l2, "data set share size")
for i = 1, l2 do
  local xi, yi = sub:get(i)
  check.near(xi, pm[i], 0, "data set share sample")
  check.near(yi, 2 * pm[i], 0, "data set share target")
end
local few = state:split_between_processes(data.TensorDataset(t), {})
check.equal(few.length, count, "data set with fewer samples than ranks")

-- reduce: every reduction Accelerate's test_ops uses, and scale.
local mine = accel.tensor({ r + 1.0, 2.0 * (r + 1) })
local sum = R * (R + 1) / 2
check.near(acc:reduce(mine, "sum"), { sum, 2 * sum }, 1e-6, "reduce sum")
check.near(state:reduce(mine), { sum, 2 * sum }, 1e-6, "reduce default sum")
check.near(acc:reduce(mine, "mean"), { sum / R, 2 * sum / R }, 1e-6, "reduce mean")
check.near(acc:reduce(mine, "max"), { R, 2 * R }, 1e-6, "reduce max")
check.near(acc:reduce(mine, "min"), { 1, 2 }, 1e-6, "reduce min")
check.near(acc:reduce(mine, "none"), { sum, 2 * sum }, 1e-6, "reduce none sums, as Accelerate's")
check.near(acc:reduce(mine, "mean", 0.5), { sum / R / 2, sum / R }, 1e-6, "reduce scale")
check.near(mine, { r + 1.0, 2.0 * (r + 1) }, 0, "reduce leaves its input alone")
-- Nested collectives. Lists only: tables keyed by strings are paired by
-- the canonical key order that test_collectives checks.
local nested_sum = acc:reduce({ mine, { mine * 2, mine * 3 } }, "sum")
check.near(nested_sum[1], { sum, 2 * sum }, 1e-6, "nested reduce [1]")
check.near(nested_sum[2][2], { 3 * sum, 6 * sum }, 1e-6, "nested reduce [2][2]")
check.raises(function() acc:reduce(mine, "avg") end, "reduce op", "reduce", "'avg'")
local g = acc:gather({ accel.tensor({ r * 1.0 }), { accel.tensor({ r * 1.0, r * 1.0 }) } })
check.equal(g[1]:size(1), R, "gather [1]")
check.equal(g[2][1]:size(1), 2 * R, "gather [2][1]")
check.near(g[1], accel.arange(0, R, { dtype = accel.float32 }), 0, "gather [1] values")
local b = acc:broadcast({ accel.tensor({ r * 1.0 }), { accel.tensor({ r + 5.0 }) } }, R - 1)
check.near(b[1], { R - 1 }, 0, "broadcast [1]")
check.near(b[2][1], { R + 4 }, 0, "broadcast [2][1]")
local p = acc:pad_across_processes({ accel.ones(r + 1), { accel.ones(1) } })
check.equal(p[1]:size(1), R, "pad [1]")
check.equal(p[2][1]:size(1), 1, "pad [2][1]")

-- on_* helpers run fn where they say and return its results there.
local ran = {}
local function mark(name) return function() ran[name] = true; return name end end
check.equal(state:on_main_process(mark("main")), r == 0 and "main" or nil, "on_main_process")
check.equal(acc:on_local_main_process(mark("local_main")), state.local_process_index == 0 and "local_main" or nil,
            "on_local_main_process")
check.equal(acc:on_last_process(mark("last")), r == R - 1 and "last" or nil, "on_last_process")
check.equal(state:on_process(1, mark("one")), r == 1 and "one" or nil, "on_process")
check.equal(state:on_process(mark("first"), 1), r == 1 and "first" or nil, "on_process, function first as in Accelerate")
check.equal(acc:on_local_process(0, mark("local0")), state.local_process_index == 0 and "local0" or nil,
            "on_local_process")
local count_ran = acc:reduce(accel.tensor({ ran.one and 1.0 or 0.0, ran.last and 1.0 or 0.0 }), "sum")
check.near(count_ran, { 1, 1 }, 0, "one rank ran on_process(1) and on_last_process")
check.raises(function() state:on_process(R, mark("none")) end, "on_process rank", "on_process", tostring(R))
check.equal(state:main_process_first(function() return r end), r, "main_process_first returns fn's results")

-- Generator states: get/set round-trips; synchronising makes draws agree.
local saved, saved_lua = accel.get_rng_state(), accel.get_math_random_state()
local first, first_lua = accel.randn(3), math.random()
accel.set_rng_state(saved)
accel.set_math_random_state(saved_lua)
check.near(accel.randn(3), first, 0, "set_rng_state replays randn")
check.equal(math.random(), first_lua, "set_math_random_state replays math.random")
check.raises(function() accel.set_rng_state(accel.zeros(3)) end, "set_rng_state type", "set_rng_state", "uint8")
accel.set_seed(1, { device_specific = true })
local differ = acc:gather(accel.randn(1))
if R > 1 then check.truthy(differ[1]:item() ~= differ[2]:item(), "device_specific seeds differ") end
acc:synchronize_rng_states()
local drawn = acc:gather(accel.randn(2):view(1, 2))
local drawn_lua = acc:gather_object(math.random())
for i = 2, R do
  check.near(drawn[i], drawn[1], 0, "randn equal after synchronize_rng_states")
  check.equal(drawn_lua[i], drawn_lua[1], "math.random equal after synchronize_rng_states")
end
accel.set_seed(2, { device_specific = true })
accel.synchronize_rng_states()
local again = acc:gather_object(accel.randn(1):item())
for i = 2, R do check.equal(again[i], again[1], "accel.synchronize_rng_states") end
check.done(check.run_name("test_process_helpers"))
