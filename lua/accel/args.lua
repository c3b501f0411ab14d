-- The public name of accel.util.args (docs/api), which the library itself requires.
return require("accel.util.args")
