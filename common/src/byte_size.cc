// ParseByteSize: digits, then an optional binary unit.
#include "gandiva/common/byte_size.h"

#include <string>

namespace gandiva {
namespace {

struct Unit {
  std::string_view name;
  unsigned shift;
};
constexpr Unit kUnits[] = {{"", 0}, {"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};

Status Malformed(std::string_view text) {
  return InvalidArgument("'" + std::string(text) +
                         "' is not a size: a positive whole number of bytes, or of KiB, MiB, "
                         "GiB or TiB (e.g. 4GiB, 512MiB)");
}

}  // namespace

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  size_t digits = 0;
  uint64_t value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(text[digits] - '0'), &value))
      return Malformed(text);
    ++digits;
  }
  if (digits == 0 || value == 0) return Malformed(text);
  const std::string_view unit = text.substr(digits);
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    if (u.shift != 0 && value > (UINT64_MAX >> u.shift)) return Malformed(text);
    return value << u.shift;
  }
  return Malformed(text);
}

}  // namespace gandiva
