// A migration's bulk key: drawn from OpenSSL's CSPRNG, carried as hex in the
// control message; see sealed_frames.h.
#include <openssl/rand.h>

#include "gandiva/sealed/sealed_frames.h"

namespace gandiva::sealed {

StatusOr<BulkKey> NewBulkKey() {
  BulkKey key;
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1)
    return Internal("no random bytes for a migration key");
  return key;
}

std::string BulkKeyToHex(const BulkKey& key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : key) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

StatusOr<BulkKey> BulkKeyFromHex(std::string_view hex) {
  if (hex.size() != 2 * kBulkKeyBytes)
    return InvalidArgument("bulk_key must be " + std::to_string(2 * kBulkKeyBytes) + " hex digits");
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  BulkKey key;
  for (size_t i = 0; i < key.size(); ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument("bulk_key must be hex digits");
    key[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

}  // namespace gandiva::sealed
