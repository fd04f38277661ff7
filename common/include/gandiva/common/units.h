// Time units in nanoseconds, the unit of every clock reading in gandiva
// (MonotonicNowNs, control-block timestamps, slicer deadlines).
#ifndef GANDIVA_COMMON_UNITS_H_
#define GANDIVA_COMMON_UNITS_H_

#include <cstdint>

namespace gandiva {

inline constexpr uint64_t kUs = 1'000;
inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint64_t kSec = 1'000'000'000;

}  // namespace gandiva

#endif  // GANDIVA_COMMON_UNITS_H_
