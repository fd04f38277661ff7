// A stand-alone check of the lane-by-lane AEGIS-256X4 code (128-bit AES
// instructions, and portable) against RFC 10032's test vector 2, with no
// library but the code itself: aegis_aarch64_check.sh builds it for aarch64
// and runs it under qemu, where ARMv8's AES instructions replace AES-NI.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "aegis256x4.h"
#include "cpu_features.h"

namespace {

std::vector<uint8_t> Hex(const char* h) {
  std::vector<uint8_t> v;
  for (size_t i = 0; h[i] && h[i + 1]; i += 2)
    v.push_back(static_cast<uint8_t>(std::stoi(std::string(h + i, 2), nullptr, 16)));
  return v;
}

}  // namespace

int main() {
  using namespace gandiva::sealed;
  const auto key = Hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  const auto nonce = Hex("101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f");
  const auto ad = Hex("0102030401020304");
  std::vector<uint8_t> msg;
  for (int i = 0; i < 30; ++i)
    for (uint8_t b : {4, 5, 6, 7}) msg.push_back(b);
  const auto ct = Hex(
      "bfc2085b7e8017da99b0b6d646ae4d01f4ba8f2e7dfca1d759ae48a135139b9aaac6b4f5db810d426be1fdaff4e1"
      "454153a34b11da78ed7e418ee2ee9853042e95536aecbb694cea1b16a478eb0d4d1bf6509b1ce652a45af58e0e46"
      "ffccfa2d0426e702391d2ff5813808b81748a490dd656465fed61f09");
  const auto tag = Hex("b63b611b13975e2f3dc3cb6c2397bfcd");
  if (!CpuHasAesRounds()) {
    std::printf("this CPU has no AES instructions\n");
    return 1;
  }
  int mismatches = 0;
  for (const bool hardware : {true, false}) {
    std::vector<uint8_t> out(msg.size());
    uint8_t got_tag[16];
    const aegis::Pass pass{key.data(), nonce.data(), ad.data(),  ad.size(),
                           msg.data(), out.data(),   msg.size(), false};
    if (hardware)
      aegis::RunAes128(pass, got_tag);
    else
      aegis::RunPortable(pass, got_tag);
    const bool ok = out == ct && std::memcmp(got_tag, tag.data(), 16) == 0;
    std::printf("%s: %s\n", hardware ? "aes128" : "portable",
                ok ? "matches RFC 10032's vector 2" : "MISMATCH");
    mismatches += !ok;
  }
  return mismatches;
}
