-- The public name of accel.util.tensor_tree (docs/api), which the library itself requires.
return require("accel.util.tensor_tree")
