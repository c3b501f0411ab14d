"""Checks a PNG that accel-run plot wrote: the signature, the size asked
for, a picture that is not blank, and lines in the two series colours.
Usage: png_check.py FILE WIDTH HEIGHT. Python's zlib only, no imaging library."""
import struct, sys, zlib

path, width, height = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit("not a PNG: %r" % data[:8])
chunks, pos = {}, 8
while pos < len(data):
    (n,) = struct.unpack(">I", data[pos:pos + 4])
    kind = data[pos + 4:pos + 8]
    chunks.setdefault(kind, []).append(data[pos + 8:pos + 8 + n])
    pos += 12 + n
w, h, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][0][:10])
if (w, h) != (width, height):
    sys.exit("size %dx%d, asked for %dx%d" % (w, h, width, height))
if depth != 8 or colour not in (2, 6):
    sys.exit("unexpected pixel format: depth %d colour type %d" % (depth, colour))
channels = 3 if colour == 2 else 4
raw = zlib.decompress(b"".join(chunks[b"IDAT"]))
stride = w * channels
rows, previous = [], bytearray(stride)
for y in range(h):  # undo PNG's per-row filters
    kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - channels] if i >= channels else 0
        b, c = previous[i], previous[i - channels] if i >= channels else 0
        if kind == 1: line[i] = (line[i] + a) & 255
        elif kind == 2: line[i] = (line[i] + b) & 255
        elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    previous = line
counts = {}
for line in rows:
    for x in range(w):
        px = tuple(line[x * channels:x * channels + 3])
        counts[px] = counts.get(px, 0) + 1
if len(counts) < 3:
    sys.exit("blank: %d colours" % len(counts))
for name, rgb in (("first run", (0x1f, 0x77, 0xb4)), ("second run", (0xff, 0x7f, 0x0e))):
    if counts.get(rgb, 0) < 50:
        sys.exit("the %s's colour %s covers %d pixels" % (name, rgb, counts.get(rgb, 0)))
print("png ok: %dx%d, %d colours" % (w, h, len(counts)))
