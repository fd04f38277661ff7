// A 128-bit tag of a chunk of a job's state, so that two processes can tell
// whether they hold the same chunk without sending it (a migration's warm copy
// tells its source which chunks it holds already: checkpoint/src/fresh_state.h).
//
// The tag is GMAC (AES-256-GCM with the chunk as associated data and nothing
// to encrypt, OpenSSL's EVP code) under a key the receiving job draws for the
// one migration, with a nonce made of the chunk's place: its section's
// position in the receiver's list and its index there. The receiver tags each
// place once, so no nonce is used twice under a key (GMAC under a repeated
// nonce gives away its hash key); the sender, checking a chunk, recomputes the
// tag of the same place, as a GCM receiver recomputes a frame's. GHASH is a
// universal hash, so two different chunks of L 16-byte blocks share a tag with
// probability at most L / 2^128 when neither depended on the key: the
// receiver's chunks are written before it draws the key, and the source's are
// fixed (it is parked) before the key reaches it. A CRC32C alone would let a
// changed chunk pass for an unchanged one once in 2^32. GMAC was chosen over a
// keyed hash (HMAC-SHA-256, BLAKE2b) for speed: see cipher_speed's rows.
//
// Thread-safety: a tagger is used by one thread.
#ifndef GANDIVA_SEALED_CHUNK_TAG_H_
#define GANDIVA_SEALED_CHUNK_TAG_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "gandiva/sealed/sealed_frames.h"
#include "gandiva/status.h"

namespace gandiva::sealed {

using ChunkTag = std::array<uint8_t, 16>;

// Where a chunk is: its section's position among the receiver's sections, and
// its index in that section. Its GMAC nonce is section (LE32), then index (LE64).
struct ChunkPlace {
  uint32_t section = 0;
  uint64_t index = 0;
};

class ChunkTagger {
 public:
  explicit ChunkTagger(const BulkKey& key);
  ~ChunkTagger();
  ChunkTagger(const ChunkTagger&) = delete;
  ChunkTagger& operator=(const ChunkTagger&) = delete;
  ChunkTagger(ChunkTagger&&) noexcept;
  ChunkTagger& operator=(ChunkTagger&&) noexcept;

  // The tag of the chunk at `place`. Internal only if OpenSSL fails.
  StatusOr<ChunkTag> Of(ChunkPlace place, std::span<const uint8_t> bytes);

 private:
  std::unique_ptr<AesGcm> gcm_;
};

}  // namespace gandiva::sealed

#endif  // GANDIVA_SEALED_CHUNK_TAG_H_
