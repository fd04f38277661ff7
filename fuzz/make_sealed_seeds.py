#!/usr/bin/python3
"""Writes the seeds of the sealed-channel harnesses (fuzz/corpus/fuzz_sealed_frames,
fuzz/corpus/fuzz_handoff) in the layouts of sealed/include/gandiva/sealed/
sealed_frames.h and sealed/src/handoff.cc, each behind its harness's first byte.
The read seeds are well-formed streams sealed under a key other than the
harness's (it must refuse them: were they under its key, they would open).
Rerun after a format change:
  fuzz/make_sealed_seeds.py fuzz/corpus
"""
import os
import struct
import sys

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

HELLO, DATA, LAST = 1, 2, 4


def frame(gcm, seq, flags, payload):
    header = struct.pack("<QII", seq, len(payload), flags)
    return header + gcm.encrypt(struct.pack("<Q", seq) + bytes(4), payload, header)


def main(corpus):
    frames_dir = os.path.join(corpus, "fuzz_sealed_frames")
    handoff_dir = os.path.join(corpus, "fuzz_handoff")
    os.makedirs(frames_dir, exist_ok=True)
    os.makedirs(handoff_dir, exist_ok=True)
    gcm = AESGCM(bytes(range(32)))  # not the harness's key
    stream = frame(gcm, 0, HELLO, struct.pack("<Q", 1))
    stream += frame(gcm, 1, DATA, b"state " * 40) + frame(gcm, 2, DATA, b"") + frame(gcm, 3, LAST, b"")
    seeds = {
        os.path.join(frames_dir, "read_stream_other_key"): b"\x00" + stream,
        os.path.join(frames_dir, "read_data_frame_other_key"): b"\x00" + frame(gcm, 0, DATA, b"x" * 100),
        os.path.join(frames_dir, "read_last_frame_other_key"): b"\x00" + frame(gcm, 0, LAST, b""),
        # position 0x0015, mask 0, frames of 16 bytes: must open whole.
        os.path.join(frames_dir, "tamper_none"): b"\x01" + struct.pack("<HBB", 0x15, 0, 15) + b"payload " * 8,
        # flip one bit of the second frame's ciphertext: must fail there.
        os.path.join(frames_dir, "tamper_second_frame"): b"\x01" + struct.pack("<HBB", 52, 4, 15) + b"payload " * 8,
    }
    message = b"GDSEAL01" + bytes(range(100, 132)) + struct.pack("<QII", 5, 0, 0)
    assert len(message) == 56
    for count in range(4):
        seeds[os.path.join(handoff_dir, "handoff_%d_descriptors" % count)] = bytes([count]) + message
    seeds[os.path.join(handoff_dir, "short")] = b"\x01" + message[:20]
    for path, data in seeds.items():
        with open(path, "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus"))
