-- accel.args, the name recipes require (recipes/*.lua) for their own
-- argument checks: accel.util.args, which the library requires itself.
return require("accel.util.args")
