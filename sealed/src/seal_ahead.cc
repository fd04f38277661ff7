// SealAhead: see seal_ahead.h.
#include "seal_ahead.h"

#include "gandiva/common/helper_thread.h"

namespace gandiva::sealed {

SealAhead::~SealAhead() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool SealAhead::Run(const uint8_t* p, size_t frames, size_t frame_payload, const Send& send,
                    Status* result) {
  if (no_thread_) return false;
  if (!thread_.joinable() && !StartHelperThread(&thread_, [this] { Loop(); })) {
    no_thread_ = true;
    return false;
  }
  const size_t frame_bytes = kSealedHeaderBytes + frame_payload + kSealedTagBytes;
  for (auto& b : buffers_)
    if (b.size() < frame_bytes) b.resize(frame_bytes);
  {
    std::lock_guard lock(mu_);
    p_ = p;
    frames_ = frames;
    payload_ = frame_payload;
    sealed_ = sent_ = 0;
    seal_error_ = Status::Ok();
    busy_ = true;
  }
  cv_.notify_all();
  Status s;
  for (size_t i = 0; i < frames && s.ok(); ++i) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return sealed_ > i || !seal_error_.ok(); });
      if (!seal_error_.ok()) {
        s = seal_error_;
        break;
      }
    }
    s = send({buffers_[i % kBuffers].data(), frame_bytes});
    {
      std::lock_guard lock(mu_);
      sent_ = i + 1;
    }
    cv_.notify_all();
  }
  {
    // Nothing of the caller's bytes or the sealer is touched once this returns.
    std::unique_lock lock(mu_);
    frames_ = 0;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !busy_; });
  }
  *result = s;
  return true;
}

void SealAhead::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (busy_ && sealed_ < frames_); });
    if (stop_) return;
    while (sealed_ < frames_) {
      // A buffer is free once the frame two before this one was sent.
      cv_.wait(lock, [&] { return stop_ || frames_ == 0 || sealed_ < sent_ + kBuffers; });
      if (stop_ || frames_ == 0) break;
      const size_t i = sealed_;
      const uint8_t* payload = p_ + i * payload_;
      uint8_t* out = buffers_[i % kBuffers].data();
      const size_t n = payload_;
      lock.unlock();
      Status s = sealer_->Seal(kSealedData, {payload, n}, out);
      lock.lock();
      if (!s.ok()) {
        seal_error_ = s;
        break;
      }
      sealed_ = i + 1;
      cv_.notify_all();
    }
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace gandiva::sealed
