// Hex strings to bytes, for the sealed component's tests.
#ifndef GANDIVA_TESTS_SEALED_TEST_HEX_H_
#define GANDIVA_TESTS_SEALED_TEST_HEX_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace gandiva::sealed::testing {

inline std::vector<uint8_t> FromHex(std::string_view hex) {
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(digit(hex[i]) << 4 | digit(hex[i + 1])));
  return out;
}

}  // namespace gandiva::sealed::testing

#endif  // GANDIVA_TESTS_SEALED_TEST_HEX_H_
