// The job's device-memory cap: an atomic charge compared against the cap.
#include "memory/memory_cap.h"

#include <algorithm>
#include <cstdlib>

#include "gandiva/common/log.h"
#include "gandiva/contract/environment.h"

namespace gandiva::shim {

uint64_t ParseCapBytes(const char* text, bool* bad) {
  if (bad) *bad = false;
  if (!text || !*text) return 0;
  uint64_t value = 0;
  for (const char* p = text; *p; ++p) {
    const bool digit = *p >= '0' && *p <= '9';
    // Anything but digits, or more than 64 bits: not a cap we can honour.
    if (!digit || __builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(*p - '0'), &value)) {
      if (bad) *bad = true;
      return 0;
    }
  }
  if (value == 0 && bad) *bad = true;
  return value;
}

MemoryCap& MemoryCap::Process() {
  static MemoryCap* cap = [] {
    const char* text = std::getenv(runtime::kEnvGpuMemoryBytes);
    bool bad = false;
    const uint64_t bytes = ParseCapBytes(text, &bad);
    // Failing open: a job with a cap it cannot read runs uncapped, and says so.
    if (bad)
      GD_LOG(kWarn, "shim: %s='%s' is not a positive byte count; no device memory cap",
             runtime::kEnvGpuMemoryBytes, text);
    return new MemoryCap(bytes);  // leaked: used until exit
  }();
  return *cap;
}

bool MemoryCap::TryCharge(uint64_t bytes) {
  uint64_t cur = charged_.load(std::memory_order_relaxed);
  do {
    // Written so that neither side can overflow: cur <= cap_ holds while capped.
    if (cap_ != 0 && (bytes > cap_ || cur > cap_ - bytes)) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!charged_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
  return true;
}

void MemoryCap::Release(uint64_t bytes) { charged_.fetch_sub(bytes, std::memory_order_relaxed); }

size_t MemoryCap::Total(size_t real_total) const {
  return cap_ == 0 ? real_total : static_cast<size_t>(std::min<uint64_t>(cap_, real_total));
}

void MemoryCap::Report(size_t* free_bytes, size_t* total_bytes) const {
  if (cap_ == 0) return;
  if (total_bytes) *total_bytes = Total(*total_bytes);
  if (free_bytes) {
    const uint64_t used = charged();
    const uint64_t room = used >= cap_ ? 0 : cap_ - used;
    *free_bytes = static_cast<size_t>(std::min<uint64_t>(*free_bytes, room));
  }
}

}  // namespace gandiva::shim
