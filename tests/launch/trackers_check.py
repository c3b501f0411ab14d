"""Reads what tests/launch/trackers_recipe.lua logged: the event file with
TensorBoard's own EventAccumulator, metrics.jsonl and config.json with
Python's json. Usage: trackers_check.py RUN_DIR (success|failure)."""
import glob, json, math, os, struct, sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import plugin_data_pb2

run_dir, outcome = sys.argv[1], sys.argv[2]
problems = []


def expect(condition, message):
    if not condition:
        problems.append(message)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


steps = [10 * s for s in range(10)]
expected = {
    "loss": [1 / (s + 1) for s in range(10)],
    "accuracy": [s * 0.1 for s in range(10)],
    "big": [1e10 + s for s in range(10)],
    "grad/norm": [s / 3 for s in range(10)],
    "tensor": [float(s * 2) for s in range(10)],
}
config = {"lr": 0.001, "batch_size": 64, "optimizer": "AdamW", "amp": False,
          "model/depth": 3, "model/width": 256, "title": "run-\u03b1"}

files = glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))
expect(len(files) == 1, "one event file (the main process's), found %s" % files)

acc = event_accumulator.EventAccumulator(run_dir, size_guidance={event_accumulator.SCALARS: 0})
acc.Reload()
tags = acc.Tags()
expect(sorted(tags["scalars"]) == sorted(list(expected) + ["late"]),
       "scalar tags %s" % sorted(tags["scalars"]))
for tag, values in expected.items():
    if tag not in tags["scalars"]:
        continue
    events = acc.Scalars(tag)
    got = [(e.step, e.value) for e in events]
    want = [(s, f32(v)) for s, v in zip(steps, values)]
    expect(got == want, "TensorBoard %s: %s, expected %s" % (tag, got, want))
if "late" in tags["scalars"]:
    expect([(e.step, e.value) for e in acc.Scalars("late")] == [(10, 7.0)], "late at step 10")

content = acc.PluginTagToContent("hparams")
start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
hparams = {}
for key, value in start.session_start_info.hparams.items():
    kind = value.WhichOneof("kind")
    hparams[key] = getattr(value, kind)
expect(hparams == config, "hparams %s, expected %s" % (hparams, config))
end = content.get("_hparams_/session_end_info")
expect(end is not None, "a session end")
if end is not None:
    status = plugin_data_pb2.HParamsPluginData.FromString(end).session_end_info.status
    expect(status == (1 if outcome == "success" else 2), "session status %d for a %s" % (status, outcome))

lines = open(os.path.join(run_dir, "metrics.jsonl")).read().splitlines()
expect(len(lines) == 11, "metrics.jsonl: 11 lines, got %d" % len(lines))
records = [json.loads(line) for line in lines]
for i, record in enumerate(records[:10]):
    expect(record["step"] == steps[i], "jsonl line %d step %s" % (i + 1, record["step"]))
    expect(abs(record["time"] - records[0]["time"]) < 600, "jsonl line %d time" % (i + 1))
    values = {k: v for k, v in record.items() if k not in ("step", "time")}
    want = {tag: vals[i] for tag, vals in expected.items()}
    expect(values == want, "jsonl line %d: %s, expected %s" % (i + 1, values, want))
if len(records) == 11:
    expect({k: v for k, v in records[10].items() if k != "time"} == {"step": 10, "late": 7},
           "jsonl last line %s" % records[10])
stored = json.load(open(os.path.join(run_dir, "config.json")))
expect(stored == config, "config.json %s" % stored)

if problems:
    print("python check failed:\n  " + "\n  ".join(problems))
    sys.exit(1)
print("tensorboard and json checks passed")
