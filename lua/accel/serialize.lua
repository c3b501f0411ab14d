-- The public name of accel.util.serialize (docs/api), which the library itself requires.
return require("accel.util.serialize")
