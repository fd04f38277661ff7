// AEGIS-256X4: the code each CPU runs, and the tag check; see aegis256x4.h.
#include "aegis256x4.h"

#include <openssl/crypto.h>

#include <cstring>

#include "cpu_features.h"
#include "gandiva/common/log.h"

namespace gandiva::sealed {

bool AegisCodeRuns(AegisCode code) {
  switch (code) {
    case AegisCode::kVaes512:
      return CpuHasAvx512Vaes();
    case AegisCode::kAes128:
      return CpuHasAesRounds();
    case AegisCode::kPortable:
      return true;
  }
  return false;
}

AegisCode FastestAegisCode() {
  static const AegisCode fastest = [] {
    if (AegisCodeRuns(AegisCode::kVaes512)) return AegisCode::kVaes512;
    if (AegisCodeRuns(AegisCode::kAes128)) return AegisCode::kAes128;
    GD_LOG(kWarn,
           "this CPU has no AES instructions: migration frames are sealed by portable code, "
           "slowly and not in constant time");
    return AegisCode::kPortable;
  }();
  return fastest;
}

const char* AegisCodeName(AegisCode code) {
  switch (code) {
    case AegisCode::kVaes512:
      return "vaes512";
    case AegisCode::kAes128:
      return "aes128";
    case AegisCode::kPortable:
      return "portable";
  }
  return "?";
}

Aegis256x4::Aegis256x4(const uint8_t* key, AegisCode code) : code_(code) {
  std::memcpy(key_, key, sizeof key_);
}

Aegis256x4::~Aegis256x4() { OPENSSL_cleanse(key_, sizeof key_); }

namespace {

void Run(AegisCode code, const aegis::Pass& pass, uint8_t* tag) {
  switch (code) {
    case AegisCode::kVaes512:
      return aegis::RunVaes512(pass, tag);
    case AegisCode::kAes128:
      return aegis::RunAes128(pass, tag);
    case AegisCode::kPortable:
      return aegis::RunPortable(pass, tag);
  }
}

}  // namespace

void Aegis256x4::Seal(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
                      uint8_t* out, size_t n, uint8_t* tag) const {
  Run(code_, {key_, nonce, aad, aad_len, in, out, n, false}, tag);
}

bool Aegis256x4::Open(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, uint8_t* data,
                      size_t n, const uint8_t* tag) const {
  uint8_t expected[kTagBytes];
  Run(code_, {key_, nonce, aad, aad_len, data, data, n, true}, expected);
  // Compared whole, without an early exit.
  const bool good = CRYPTO_memcmp(expected, tag, kTagBytes) == 0;
  if (!good && n > 0) std::memset(data, 0, n);  // data may be null when n is 0
  return good;
}

}  // namespace gandiva::sealed
