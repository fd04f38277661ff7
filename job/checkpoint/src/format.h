// The checkpoint stream format, version 1: an 16-byte preamble then frames,
// each a 16-byte header (type, payload length, payload CRC32C, header CRC32C)
// and a payload. docs/checkpoint.md has the table. Little-endian throughout.
#ifndef GANDIVA_CHECKPOINT_FORMAT_H_
#define GANDIVA_CHECKPOINT_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace gandiva::checkpoint {

// Preamble: magic, format version, and the CRC32C of those 12 bytes.
inline constexpr char kMagic[8] = {'G', 'D', 'C', 'K', 'P', 'T', '\r', '\n'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kPreambleSize = 16;

enum FrameType : uint8_t {
  kFrameHeader = 1,        // payload: "key=value\n" metadata lines
  kFrameSectionBegin = 2,  // payload: the section name (1..kMaxSectionName bytes)
  kFrameChunk = 3,         // payload: up to kMaxChunkPayload bytes of section data
  kFrameSectionEnd = 4,    // payload: SectionEndPayload
  kFrameEnd = 5,           // payload: EndPayload
  // Only on a migration's bulk connection, never in a file: "the receiver
  // holds this chunk already" (the chunk at the same place in its own fresh
  // state: fresh_state.h). Counts as a chunk of SameChunkPayload::length
  // bytes. payload: SameChunkPayload
  kFrameChunkSame = 6,
};

// Large enough that per-chunk costs (a syscall, a header) vanish, small enough
// that a reader verifies and forwards chunks while the next one is in flight.
inline constexpr uint32_t kMaxChunkPayload = 4u << 20;
inline constexpr uint32_t kMaxSectionName = 256;
inline constexpr uint32_t kMaxHeaderPayload = 64u << 10;

struct FrameHeader {
  uint8_t type;
  uint8_t reserved[3];
  uint32_t length;       // payload bytes
  uint32_t payload_crc;  // CRC32C of the payload
  uint32_t header_crc;   // CRC32C of the 12 bytes above: a flipped length is caught too
};
static_assert(sizeof(FrameHeader) == 16);

struct SectionEndPayload {
  uint64_t bytes;   // data bytes in the section
  uint64_t chunks;  // chunk frames in the section
};
static_assert(sizeof(SectionEndPayload) == 16);

struct EndPayload {
  uint64_t stream_bytes;  // bytes before the end frame, preamble included
  uint64_t chunks;        // chunk frames in the stream
  uint64_t sections;
  uint32_t digest;  // CRC32C over every earlier frame's header_crc, in order
  uint32_t reserved;
};
static_assert(sizeof(EndPayload) == 32);

struct SameChunkPayload {
  uint32_t length;  // data bytes of the chunk
  uint32_t crc;     // their CRC32C
  uint8_t tag[16];  // their tag under the receiver's key (gandiva/sealed/chunk_tag.h)
};
static_assert(sizeof(SameChunkPayload) == 24);

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_FORMAT_H_
