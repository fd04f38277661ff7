// A 128-bit tag of a chunk of a job's state, so that two processes can tell
// whether they hold the same chunk without sending it (a migration's warm copy
// tells its source which chunks it holds already: checkpoint/src/fresh_state.h).
//
// The tag is GMAC: AES-256-GCM with the chunk as associated data, under a key
// the receiving job draws for the one migration (fixed nonce: the tags never
// leave the two jobs, and only their equality is used). GHASH is a universal
// hash, so two different chunks of L 16-byte blocks share a tag with
// probability at most L / 2^128 when neither chunk depended on the key: the
// receiver's chunks are written before it draws the key, and the source's are
// fixed (it is parked) before the key reaches it. A CRC32C alone would let a
// changed chunk pass for an unchanged one once in 2^32. GHASH on VPCLMULQDQ
// runs at memory speed (see aes_gcm_vaes.h).
//
// Thread-safety: a tagger is used by one thread.
#ifndef GANDIVA_CONTRACT_CHUNK_TAG_H_
#define GANDIVA_CONTRACT_CHUNK_TAG_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "gandiva/contract/sealed_frames.h"
#include "gandiva/status.h"

namespace gandiva::sealed {

using ChunkTag = std::array<uint8_t, 16>;

struct CipherContext;  // the key schedule, behind a pointer

class ChunkTagger {
 public:
  // The same tags whichever code computes them (SealedCipher, sealed_frames.h).
  explicit ChunkTagger(const BulkKey& key, SealedCipher cipher = SealedCipher::kFastest);
  ~ChunkTagger();
  ChunkTagger(const ChunkTagger&) = delete;
  ChunkTagger& operator=(const ChunkTagger&) = delete;
  ChunkTagger(ChunkTagger&&) noexcept;
  ChunkTagger& operator=(ChunkTagger&&) noexcept;

  // Internal only if OpenSSL fails.
  StatusOr<ChunkTag> Of(std::span<const uint8_t> bytes);

 private:
  std::unique_ptr<CipherContext> ctx_;
};

}  // namespace gandiva::sealed

#endif  // GANDIVA_CONTRACT_CHUNK_TAG_H_
