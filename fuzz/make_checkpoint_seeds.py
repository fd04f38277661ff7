#!/usr/bin/python3
"""Writes the checkpoint harness's seeds (fuzz/corpus/fuzz_checkpoint_stream):
small valid streams in the layout of job/checkpoint/src/format.h, and a list of
held chunks (job/checkpoint/src/held_chunks.h), each behind the harness's flags
byte. Rerun after a format change:
  fuzz/make_checkpoint_seeds.py fuzz/corpus/fuzz_checkpoint_stream
"""
import os
import struct
import sys


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283

HEADER, BEGIN, CHUNK, SECTION_END, END = 1, 2, 3, 4, 5


def stream(sections, metadata):
    pre = b"GDCKPT\r\n" + struct.pack("<I", 1)
    out = bytearray(pre + struct.pack("<I", crc32c(pre)))
    digest = chunks = 0

    def frame(kind, payload):
        nonlocal digest
        head = struct.pack("<B3xII", kind, len(payload), crc32c(payload))
        header_crc = crc32c(head)
        out.extend(head + struct.pack("<I", header_crc) + payload)
        digest = crc32c(struct.pack("<I", header_crc), digest)

    frame(HEADER, "".join(f"{k}={v}\n" for k, v in metadata).encode())
    for name, pieces in sections:
        frame(BEGIN, name.encode())
        for p in pieces:
            frame(CHUNK, p)
            chunks += 1
        frame(SECTION_END, struct.pack("<QQ", sum(map(len, pieces)), len(pieces)))
    frame(END, struct.pack("<QQQII", len(out), chunks, len(sections), digest, 0))
    return bytes(out)


def held_list(sections):
    """The list a migration's destination sends: magic, key, sections of
    (length, CRC32C, tag) per chunk."""
    out = bytearray(b"GDHELD1\n" + bytes(range(32)) + struct.pack("<I", len(sections)))
    for name, chunks in sections:
        out += struct.pack("<H", len(name)) + name.encode() + struct.pack("<I", len(chunks))
        for data in chunks:
            out += struct.pack("<II", len(data), crc32c(data)) + bytes(16)
    return bytes(out)


META = [("job_id", "7"), ("job_name", "resnet"), ("created_unix_ms", "1700000000000"),
        ("host", "node1"), ("pid", "4242"), ("sections", "model,optimizer")]
SEEDS = {
    "empty_stream": (0x00, stream([], META[:5])),
    "two_sections": (0x00, stream([("model", [b"weights" * 9, b"more"]),
                                   ("optimizer", [b"\x00\x01\x02\x03"])], META)),
    "two_sections_streamed": (0x02 | (2 << 2), stream([("model", [b"w" * 40, b"xyz"]),
                                                        ("optimizer", [b""])], META)),
    "empty_section_fixed": (0x01, stream([("rng", [])], META[:2])),
    # Streamed, "model" is the harness's 64 KiB buffer section: the first chunk
    # is received in place, the second would run past the buffer and is not.
    "buffer_overrun_streamed": (0x02 | (9 << 2), stream([("model", [b"a" * 40000, b"b" * 30000])],
                                                        META[:2])),
    "held_list": (0x08, held_list([("model", [b"\x00" * 16, b"\x00" * 32]), ("optimizer", [])])),
}

if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, (flags, data) in SEEDS.items():
        with open(os.path.join(sys.argv[1], name), "wb") as f:
            f.write(bytes([flags]) + data)
