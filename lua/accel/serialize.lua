-- accel.serialize, the name docs/api/checkpointing.md gives the value-file
-- format: accel.util.serialize, which the library requires itself.
return require("accel.util.serialize")
