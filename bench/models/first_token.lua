-- The workload of watch_first_token.py: load a pretrained folder and
-- generate one token; each rank prints the monotonic time its token was
-- ready (accel.time is CLOCK_MONOTONIC, as Python's time.monotonic) and how
-- many tensors the warm worker handed it from what a previous run loaded.
--   accel-run first_token.lua -- FOLDER
local model = accel.models.from_pretrained(arg[1])
local ids = accel.LongTensor({ { 1, 2, 3, 4, 5, 6, 7, 8 } })
model:generate(ids, { max_new_tokens = 1 })
local ready = accel.time()
local kept = require("accel.core").formats.kept_weights()
print(string.format("FIRST_TOKEN %s %.6f %d", os.getenv("RANK") or "0", ready, kept.found))
