-- CSVDataset and data.read_csv: columns by name and number, targets and
-- their dtype, delimiters, quotes, blank lines, CRLF, gzip, and errors that
-- name file, line and column.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local data = accel.data

local function write(text, suffix)
  local path = os.tmpname() .. (suffix or ".csv")
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

-- With a header; the target by name, features by default every other column.
local iris = write("sepal,petal,species\n5.1,1.4,1\n4.9,1.5,2\n\n6.3,4.9,3\n")
local ds = data.CSVDataset(iris, { header = true, target = "species" })
check.equal(accel.data.DataLoader(ds, {}):num_batches(), 3, "blank lines are skipped")
check.near(ds.features, { { 5.1, 1.4 }, { 4.9, 1.5 }, { 6.3, 4.9 } }, 1e-6, "features")
check.equal(ds.features.dtype, "float32", "features are float32")
check.near(ds.targets, { 1, 2, 3 }, 0, "targets")
check.equal(ds.targets.dtype, "int64", "targets default to int64")
check.equal(table.concat(ds.columns, ","), "sepal,petal", "feature column names")
local x, y = ds:get(2)
check.near(x, { 4.9, 1.5 }, 1e-6, "get(2) features")
check.near(y, 2, 0, "get(2) target")
local batches = 0
for xb, yb in data.DataLoader(ds, { batch_size = 2 }):iter() do
  batches = batches + 1
  check.equal(xb:size(2), 2, "a batch of features")
  check.equal(yb:dim(), 1, "a batch of targets")
end
check.equal(batches, 2, "a CSVDataset batches like a TensorDataset")

-- Columns by number (1-based) and by name, in the order given; a float target.
ds = data.CSVDataset(iris, { header = true, columns = { 2, "sepal" }, target = 3, target_dtype = accel.float32 })
check.near(ds.features[1], { 1.4, 5.1 }, 1e-6, "columns in the order given")
check.equal(ds.targets.dtype, "float32", "target_dtype")
check.equal(table.concat(ds.columns, ","), "petal,sepal", "names of chosen columns")

-- No header, no target: a data set of one tensor; other delimiters, quotes,
-- CRLF line ends, signs and exponents; a text column never asked for.
local semi = write('1;"2.5";-3e2;alice\r\n+4;5;6;"bob; jr"\r\n')
ds = data.CSVDataset(semi, { delimiter = ";", columns = { 1, 2, 3 } })
check.near(ds.features, { { 1, 2.5, -300 }, { 4, 5, 6 } }, 0, "semicolons, quotes, CRLF, signs")
check.equal(ds.targets, nil, "no target")
check.equal(table.concat(ds.columns, ","), "1,2,3", "columns named by number without a header")
check.equal(select("#", ds:get(1)), 1, "one field per sample without a target")

-- gzip, detected from the bytes; read_csv gives every column.
local plain = write("1,2,3\n4,5,6\n")
local gz = plain .. ".gz"
check.truthy(os.execute("gzip -c '" .. plain .. "' > '" .. gz .. "'") == 0, "gzip ran")
check.near(data.read_csv(gz), { { 1, 2, 3 }, { 4, 5, 6 } }, 0, "read_csv of a .gz file")
check.near(data.CSVDataset(gz, { target = 3 }).targets, { 3, 6 }, 0, "CSVDataset of a .gz file")
check.near(data.read_csv(iris, { header = true }), { { 5.1, 1.4, 1 }, { 4.9, 1.5, 2 }, { 6.3, 4.9, 3 } }, 1e-6,
           "read_csv with a header")

-- Errors name the file, line and column.
local bad = write("1,2,3\n4,5,6\n\n7,abc,9\n")
local name = bad:match("[^/]+$")
check.raises(function() data.read_csv(bad) end, "not a number", name .. ":4: column 2 'abc' is not a number")
check.raises(function() data.CSVDataset(bad, { columns = { 1, 2 } }) end, "CSVDataset names the field",
             name .. ":4: column 2 'abc' is not a number", "CSVDataset")
check.near(data.CSVDataset(bad, { columns = { 1, 3 } }).features, { { 1, 3 }, { 4, 6 }, { 7, 9 } }, 0,
           "a bad column not asked for is not parsed")
check.raises(function() data.read_csv(write("1,2\n3\n")) end, "ragged", ":2: 1 columns, but line 1 has 2")
check.raises(function() data.CSVDataset(write("a,b\n1,2.5\n"), { header = true, target = "b" }) end,
             "integer target", ":2: column 2 '2.5' is not an integer (column 'b')")
check.raises(function() data.CSVDataset(write("a,b\n1,\n"), { header = true }) end, "empty field",
             ":2: column 2 '' is not a number")
check.raises(function() data.read_csv(write('1,"2\n')) end, "quote", ":1: column 2 has an unterminated quote")
check.raises(function() data.CSVDataset(iris, { header = true, target = "kind" }) end, "unknown name",
             "no column named 'kind'", "sepal, petal, species")
check.raises(function() data.CSVDataset(plain, { target = "kind" }) end, "name without header",
             "column 'kind' is given by name", "header = true")
check.raises(function() data.CSVDataset(plain, { columns = { 4 } }) end, "column number",
             "feature column 4 does not exist", "has 3 columns")
check.raises(function() data.CSVDataset(plain, { colums = { 1 } }) end, "unknown option", "colums")
check.raises(function() data.CSVDataset(plain, { delimiter = ";;" }) end, "delimiter", "one character")
check.raises(function() data.read_csv(plain .. ".missing") end, "missing file", "cannot open",
             "No such file or directory")
check.raises(function() data.CSVDataset(plain, { target_dtype = accel.float32 }) end, "dtype without target",
             "target_dtype")

for _, path in ipairs({ iris, semi, plain, gz, bad }) do os.remove(path) end
check.done("test_data_csv")
