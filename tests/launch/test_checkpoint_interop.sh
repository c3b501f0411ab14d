# Weights written by acc:save_model are read by an independent safetensors
# reader (Python's json and struct only), by the Hugging Face index layout
# rules and by Python's torch.load, with the same values; and files
# written by torch.save and by hand in Python load back with acc:load_model.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/checkpoint_interop.lua"
python=/usr/bin/python3

run_accel "$recipe" -- write "$work"
expect "save_model runs" [ "$status" -eq 0 ]
expect "one shard: model.safetensors alone" [ "$(ls "$work/single")" = "model.safetensors" ]
expect "sharded: an index beside the shards" [ -f "$work/sharded/model.safetensors.index.json" ]
expect "sharded: shards named model-0000k-of-0000N" [ -f "$work/sharded/model-00001-of-0000$(ls "$work/sharded" | grep -c '^model-')".safetensors ]
expect "safe_serialization = false: pytorch_model.bin" [ "$(ls "$work/bin")" = "pytorch_model.bin" ]
expect "sharded .bin: an index" [ -f "$work/bin_sharded/pytorch_model.bin.index.json" ]

cat >"$work/check.py" <<'PY'
import collections, json, os, re, struct, sys

root = sys.argv[1]
expected = json.load(open(os.path.join(root, "expected.json")))
names = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
         "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}
formats = {"F64": "d", "F32": "f", "F16": "e", "BF16": "H", "I64": "q", "I32": "i", "I16": "h", "I8": "b",
           "U8": "B", "BOOL": "?"}

def fail(message):
    print("python check failed: " + message)
    sys.exit(1)

def read_safetensors(path):
    """An independent reader: the format's spec, json and struct only."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    if (8 + n) % 8:
        fail(path + ": data does not start 8-byte aligned")
    metadata = header.pop("__metadata__", {})
    if metadata.get("format") != "pt":
        fail(path + ": transformers needs __metadata__.format == 'pt', got %r" % metadata)
    spans, tensors = [], {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        spans.append((begin, end))
        code = formats[info["dtype"]]
        count = (end - begin) // struct.calcsize(code)
        values = struct.unpack("<%d%s" % (count, code), data[8 + n + begin:8 + n + end])
        if info["dtype"] == "BF16":
            values = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in values]
        tensors[name] = (info["dtype"], info["shape"], [float(v) for v in values])
    spans.sort()
    position = 0
    for begin, end in spans:  # the safetensors library's own validation
        if begin != position:
            fail(path + ": tensors do not cover the data without holes")
        position = end
    if 8 + n + position != len(data):
        fail(path + ": trailing bytes after the last tensor")
    return tensors

def check_values(where, name, dtype, shape, values):
    want = expected.get(name)
    if want is None:
        fail("%s: unexpected tensor %s" % (where, name))
    if dtype != names[want["dtype"]] or list(shape) != want["shape"] or values != want["values"]:
        fail("%s: %s is %s%s %s, expected %s%s %s" % (where, name, dtype, shape, values[:4],
                                                   names[want["dtype"]], want["shape"], want["values"][:4]))

def check_all(where, tensors):
    if set(tensors) != set(expected):
        fail("%s: tensors %s, expected %s" % (where, sorted(tensors), sorted(expected)))
    for name, (dtype, shape, values) in tensors.items():
        check_values(where, name, dtype, shape, values)

check_all("single", read_safetensors(os.path.join(root, "single", "model.safetensors")))

def read_index(folder, index_name, shard_pattern, reader):
    index = json.load(open(os.path.join(folder, index_name)))
    files = sorted(set(index["weight_map"].values()))
    if len(files) < 2 or not all(re.fullmatch(shard_pattern % len(files), f) for f in files):
        fail("%s: shard names %s" % (folder, files))
    tensors = {}
    for f in files:
        for name, value in reader(os.path.join(folder, f)).items():
            if index["weight_map"].get(name) != f:
                fail("%s: %s found in %s, the index says %s" % (folder, name, f, index["weight_map"].get(name)))
            tensors[name] = value
    total = sum(len(v[2]) * struct.calcsize(formats[v[0]]) for v in tensors.values())
    if index["metadata"]["total_size"] != total:
        fail("%s: total_size %s, the tensors hold %d bytes" % (folder, index["metadata"]["total_size"], total))
    return tensors

check_all("sharded", read_index(os.path.join(root, "sharded"), "model.safetensors.index.json",
                                r"model-\d{5}-of-%05d\.safetensors", read_safetensors))

import torch

torch_names = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
               torch.int64: "I64", torch.int8: "I8", torch.bool: "BOOL"}

def read_bin(path):
    state = torch.load(path)
    if not isinstance(state, dict):
        fail("%s: torch.load gave a %s, not a dict" % (path, type(state)))
    return {name: (torch_names[t.dtype], list(t.shape), [float(v) for v in t.double().flatten().tolist()])
            for name, t in state.items()}

check_all("pytorch_model.bin", read_bin(os.path.join(root, "bin", "pytorch_model.bin")))
check_all("sharded .bin", read_index(os.path.join(root, "bin_sharded"), "pytorch_model.bin.index.json",
                                     r"pytorch_model-\d{5}-of-%05d\.bin", read_bin))

# The other way: files written by Python for acc:load_model.
dtypes = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int64": torch.int64, "int8": torch.int8, "bool": torch.bool}

def shifted(k):
    out = collections.OrderedDict()
    for name, want in sorted(expected.items()):
        t = torch.tensor(want["values"], dtype=torch.float64).reshape(want["shape"])
        if want["dtype"] == "bool":
            out[name] = (t != 0) ^ bool(k % 2)
        else:
            out[name] = (t + k).to(dtypes[want["dtype"]])
    return out

os.makedirs(os.path.join(root, "from_python_bin"))
torch.save(shifted(1), os.path.join(root, "from_python_bin", "pytorch_model.bin"))

# Tensors in reverse name order, packed with no alignment (as the spec allows).
tensors = shifted(2)
header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
for name in reversed(list(tensors)):
    t = tensors[name].contiguous()
    raw = t.view(torch.uint8).numpy().tobytes() if t.dim() > 0 else t.reshape(1).view(torch.uint8).numpy().tobytes()
    header[name] = {"dtype": names[expected[name]["dtype"]], "shape": list(t.shape),
                    "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
text = json.dumps(header).encode("utf-8")
os.makedirs(os.path.join(root, "from_python_st"))
with open(os.path.join(root, "from_python_st", "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
print("python checks passed")
PY

python_check() { "$python" "$work/check.py" "$work" >"$work/python.out" 2>&1; }
expect "Python reads every file with the values written" python_check
expect "Python says so" grep -q "python checks passed" "$work/python.out"
[ -f "$work/python.out" ] && cat "$work/python.out"

run_accel "$recipe" -- read "$work"
expect "load_model reads its own files, torch.save's and Python-written safetensors" [ "$status" -eq 0 ]
expect "every read check passed" contains "$out" "checkpoint interop read: "

finish
