// CrcAhead: see crc_ahead.h.
#include "crc_ahead.h"

#include "crc32c.h"
#include "gandiva/common/helper_thread.h"

namespace gandiva::checkpoint {

CrcAhead::~CrcAhead() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CrcAhead::Start(const uint8_t* p, size_t n) {
  if (no_thread_) return;
  if (!thread_.joinable() && !StartHelperThread(&thread_, [this] { Run(); })) {
    no_thread_ = true;
    return;
  }
  {
    std::lock_guard lock(mu_);
    queued_ = {p, n};
    result_ = {};  // an older one is nobody's now
  }
  cv_.notify_all();
}

uint32_t CrcAhead::Of(const uint8_t* p, size_t n) {
  {
    std::unique_lock lock(mu_);
    if (queued_.Is(p, n) || busy_.Is(p, n) || result_.Is(p, n)) {
      cv_.wait(lock, [&] { return result_.Is(p, n); });
      result_ = {};
      return crc_;
    }
  }
  return Crc32c(p, n);
}

void CrcAhead::Settle() {
  std::unique_lock lock(mu_);
  queued_ = {};
  cv_.wait(lock, [this] { return busy_.p == nullptr; });
  result_ = {};
}

void CrcAhead::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || queued_.p != nullptr; });
    if (stop_) return;
    busy_ = queued_;
    queued_ = {};
    lock.unlock();
    const uint32_t crc = Crc32c(busy_.p, busy_.n);  // busy_ changes only here
    lock.lock();
    result_ = busy_;
    crc_ = crc;
    busy_ = {};
    cv_.notify_all();
  }
}

}  // namespace gandiva::checkpoint
