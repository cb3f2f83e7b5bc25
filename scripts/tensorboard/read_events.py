#!/usr/bin/python3
"""An independent reader (and writer) of TensorBoard event files.

It compiles proto/event.proto and proto/summary.proto (minimal copies of
TensorFlow's, with the real field numbers) with protoc, and uses Python's
protobuf (Debian python3-protobuf, protobuf-compiler) to decode or encode
the Event messages; TFRecord's framing and its masked CRC-32C are checked
here with a CRC written from its definition, not Go's.

  read_events.py read FILE    print every record of FILE as JSON lines;
                              exit 1 naming the record whose CRC is wrong
  read_events.py write FILE   write the golden events below to FILE
                              (internal/tfevent/testdata/python.tfevents)

The Go tests of internal/tfevent run "read" on files that Go wrote, and
decode the committed output of "write".
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def crc32c(data):
    # CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, bit by bit.
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def compile_protos():
    out = tempfile.mkdtemp(prefix="tfevent-proto-")
    proto = os.path.join(HERE, "proto")
    subprocess.run(["protoc", "-I", proto, "--python_out", out,
                    os.path.join(proto, "event.proto"), os.path.join(proto, "summary.proto")],
                   check=True)
    sys.path.insert(0, out)
    import event_pb2
    return event_pb2


def read(path, event_pb2):
    data = open(path, "rb").read()
    off, n = 0, 0
    while off < len(data):
        if len(data) - off < 12:
            sys.exit(f"{path}: record {n} at offset {off}: {len(data) - off} bytes, header needs 12")
        header = data[off:off + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[off + 8:off + 12])
        if hcrc != masked(header):
            sys.exit(f"{path}: record {n} at offset {off}: length CRC {hcrc:#010x}, want {masked(header):#010x}")
        payload = data[off + 12:off + 12 + length]
        if len(payload) != length or len(data) < off + 16 + length:
            sys.exit(f"{path}: record {n} at offset {off}: cut short")
        (dcrc,) = struct.unpack("<I", data[off + 12 + length:off + 16 + length])
        if dcrc != masked(payload):
            sys.exit(f"{path}: record {n} at offset {off}: data CRC {dcrc:#010x}, want {masked(payload):#010x}")
        ev = event_pb2.Event()
        ev.ParseFromString(payload)
        rec = {"wall_time": ev.wall_time, "step": ev.step}
        if ev.HasField("file_version"):
            rec["file_version"] = ev.file_version
        if ev.HasField("summary"):
            rec["values"] = [{"tag": v.tag, "simple_value": v.simple_value} for v in ev.summary.value]
        print(json.dumps(rec))
        off += 16 + length
        n += 1


def write(path, event_pb2):
    events = []
    ev = event_pb2.Event(wall_time=1700000000.25, file_version="brain.Event:2")
    events.append(ev)
    for step, loss in [(1, 10.5), (2, 9.75), (300, 3.125)]:
        ev = event_pb2.Event(wall_time=1700000000.5 + step, step=step)
        ev.summary.value.add(tag="train/loss", simple_value=loss)
        ev.summary.value.add(tag="perf/tokens", simple_value=step * 4096.0)
        events.append(ev)
    with open(path, "wb") as f:
        for ev in events:
            payload = ev.SerializeToString()
            header = struct.pack("<Q", len(payload))
            f.write(header + struct.pack("<I", masked(header)) + payload + struct.pack("<I", masked(payload)))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("read", "write"):
        sys.exit(__doc__)
    event_pb2 = compile_protos()
    {"read": read, "write": write}[sys.argv[1]](sys.argv[2], event_pb2)


if __name__ == "__main__":
    main()
