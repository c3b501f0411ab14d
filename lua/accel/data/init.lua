-- accel.data: data sets and loaders.
local data = {}
data.TensorDataset = require("accel.data.tensor_dataset")
data.DataLoader = require("accel.data.dataloader")
data.read_csv = require("accel.data.csv").read
return data
