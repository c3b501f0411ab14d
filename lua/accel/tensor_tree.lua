-- accel.tensor_tree, the name docs/api/tensors.md gives: accel.util.tensor_tree,
-- which the library requires itself.
return require("accel.util.tensor_tree")
