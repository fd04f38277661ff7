// The bulk channel of a migration: the job's state travels from the source
// job to the destination job over a plain TCP connection of its own, which the
// two gandivad open and hand to their jobs (sealed_channel.h), in frames sealed
// with AES-256-GCM (OpenSSL's EVP interface) under a key used for this one
// migration. CURVE stays on the gandivads' control connection, which carries
// that key (so only the peer the source authenticated can read or forge a
// frame); CURVE's own framing costs twice the cipher on a bulk transfer.
//
// A frame on the wire: a 16-byte header in the clear, the ciphertext, a 16-byte
// tag. The header (sequence number, length, flags) is the AEAD's associated
// data; the 96-bit nonce is the sequence number the receiver expects, counted
// from 0 (little-endian, then four zero bytes), so no nonce repeats under a
// key. A frame that was modified, replayed, reordered or dropped fails to
// open, and a stream cut short is told from a finished one by its last frame.
// Frame 0 is a hello naming the destination's job: a connection that cannot
// open it never reached the state.
//
// Thread-safety: a sealer or opener is used by one thread.
#ifndef GANDIVA_SEALED_SEALED_FRAMES_H_
#define GANDIVA_SEALED_SEALED_FRAMES_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gandiva/status.h"

namespace gandiva::sealed {

inline constexpr size_t kBulkKeyBytes = 32;
inline constexpr size_t kSealedHeaderBytes = 16;
inline constexpr size_t kSealedTagBytes = 16;
// No frame is larger: a receiver refuses a header that says more.
inline constexpr uint32_t kMaxSealedPayload = 8u << 20;

using BulkKey = std::array<uint8_t, kBulkKeyBytes>;

enum SealedFlags : uint32_t {
  kSealedHello = 1,  // frame 0: the destination's job id (8 bytes, little-endian)
  kSealedData = 2,   // the next bytes of the state
  kSealedLast = 4,   // the stream is complete (no payload)
};

struct SealedHeader {
  uint64_t seq;
  uint32_t length;  // ciphertext bytes (the tag follows)
  uint32_t flags;
};
static_assert(sizeof(SealedHeader) == kSealedHeaderBytes);

// A fresh random key (OpenSSL's CSPRNG); as hex for the control message.
StatusOr<BulkKey> NewBulkKey();
std::string BulkKeyToHex(const BulkKey& key);
StatusOr<BulkKey> BulkKeyFromHex(std::string_view hex);

class AesGcm;  // OpenSSL's context, behind a pointer

// The 96-bit nonce of frame `seq`: never repeats under one key, and is not
// sent (the receiver counts), so a frame moved elsewhere in the stream cannot
// open.
inline constexpr size_t kSealedNonceBytes = 12;
std::array<uint8_t, kSealedNonceBytes> FrameNonce(uint64_t seq);

// Seals frames first_seq, first_seq + 1, ... in order.
class FrameSealer {
 public:
  explicit FrameSealer(const BulkKey& key, uint64_t first_seq = 0);
  ~FrameSealer();
  // Writes header, ciphertext and tag of the next frame into `out`, which must
  // hold kSealedHeaderBytes + payload.size() + kSealedTagBytes bytes; `out`
  // may start kSealedHeaderBytes before `payload` (sealing in place).
  // Internal only if OpenSSL fails.
  Status Seal(uint32_t flags, std::span<const uint8_t> payload, uint8_t* out);
  uint64_t next_seq() const { return seq_; }
  // Steps over n numbers that other sealers under this key seal (several
  // threads sealing one stream's frames, seal_ahead.h); numbers only move on.
  void Skip(uint64_t n) { seq_ += n; }

 private:
  std::unique_ptr<AesGcm> gcm_;
  uint64_t seq_ = 0;
};

// Opens frames first_seq, first_seq + 1, ... in order.
class FrameOpener {
 public:
  explicit FrameOpener(const BulkKey& key, uint64_t first_seq = 0);
  ~FrameOpener();
  // Checks a received header against what may come next: DataLoss if it is out
  // of sequence or too long.
  StatusOr<SealedHeader> CheckHeader(const uint8_t* header) const;
  // Decrypts `ciphertext` (header.length bytes) in place and authenticates it
  // and the header with `tag`: DataLoss if it does not open (its bytes are
  // then zeroed).
  Status Open(const uint8_t* header, uint8_t* ciphertext, const uint8_t* tag);
  uint64_t next_seq() const { return seq_; }

 private:
  std::unique_ptr<AesGcm> gcm_;
  uint64_t seq_ = 0;
};

}  // namespace gandiva::sealed

#endif  // GANDIVA_SEALED_SEALED_FRAMES_H_
