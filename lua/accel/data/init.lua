-- accel.data: data sets and loaders (docs/api/data.md).
local data = {}
data.TensorDataset = require("accel.data.tensor_dataset")
data.CSVDataset = require("accel.data.csv_dataset")
data.TextDataset = require("accel.data.text_dataset")
data.Subset = require("accel.data.subset")
data.random_split = require("accel.data.random_split")
data.DataLoader = require("accel.data.dataloader")
local samplers = require("accel.data.samplers")
data.SequentialSampler, data.RandomSampler, data.BatchSampler =
  samplers.SequentialSampler, samplers.RandomSampler, samplers.BatchSampler
data.read_csv = data.CSVDataset.read
return data
