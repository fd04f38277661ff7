// SealAhead: see seal_ahead.h.
#include "seal_ahead.h"

#include <algorithm>

#include "gandiva/common/helper_thread.h"

namespace gandiva::sealed {

SealAhead::SealAhead(FrameSealer* sealer, const BulkKey& key, int sealers)
    : sealer_(sealer),
      key_(key),
      sealers_(static_cast<size_t>(std::max(1, sealers))),
      buffers_(std::max<size_t>(4, 2 * sealers_)),
      sealed_in_(buffers_.size(), 0) {}

SealAhead::~SealAhead() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

int SealAhead::DefaultSealers() {
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cores / 4, 1u, 4u));
}

bool SealAhead::Run(const uint8_t* p, size_t frames, size_t frame_payload, const Send& send,
                    Status* result) {
  if (no_thread_) return false;
  // The threads, once: each waits for the first Run's number (run_) before
  // it reads anything else.
  if (threads_.empty()) {
    for (size_t t = 0; t < sealers_; ++t) {
      std::thread thread;
      if (!StartHelperThread(&thread, [this, t] { Loop(t); })) break;
      threads_.push_back(std::move(thread));
    }
    if (threads_.empty()) {
      no_thread_ = true;
      return false;
    }
  }
  const size_t helpers = threads_.size();  // fewer than asked if threads ran out
  const size_t frame_bytes = kSealedHeaderBytes + frame_payload + kSealedTagBytes;
  for (auto& b : buffers_)
    if (b.size() < frame_bytes) b.resize(frame_bytes);
  const size_t ring = buffers_.size();
  {
    std::lock_guard lock(mu_);
    p_ = p;
    first_seq_ = sealer_->next_seq();
    frames_ = frames;
    payload_ = frame_payload;
    std::fill(sealed_in_.begin(), sealed_in_.end(), 0);
    sent_ = 0;
    seal_error_ = Status::Ok();
    helpers_ = busy_ = helpers;
    ++run_;
  }
  cv_.notify_all();
  Status s;
  for (size_t i = 0; i < frames && s.ok(); ++i) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return sealed_in_[i % ring] == i + 1 || !seal_error_.ok(); });
      if (!seal_error_.ok()) {
        s = seal_error_;
        break;
      }
    }
    s = send({buffers_[i % ring].data(), frame_bytes});
    {
      std::lock_guard lock(mu_);
      sent_ = i + 1;
    }
    cv_.notify_all();
  }
  {
    // Nothing of the caller's bytes is touched once this returns.
    std::unique_lock lock(mu_);
    frames_ = 0;
    cv_.notify_all();
    cv_.wait(lock, [&] { return busy_ == 0; });
  }
  sealer_->Skip(frames);
  *result = s;
  return true;
}

// Helper t seals frames t, t + helpers, t + 2 * helpers, ... of each Run, the
// one sealer that helper keeps for the Run stepping over the others' numbers.
void SealAhead::Loop(size_t t) {
  std::unique_lock lock(mu_);
  uint64_t done_run = 0;
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || run_ != done_run; });
    if (stop_) return;
    done_run = run_;
    const size_t helpers = helpers_;
    const size_t ring = buffers_.size();
    FrameSealer mine(key_, first_seq_ + t);
    for (size_t i = t; i < frames_; i += helpers) {
      // A buffer is free once the frame `ring` before this one was sent.
      cv_.wait(lock, [&] { return stop_ || frames_ == 0 || i < sent_ + ring; });
      if (stop_ || frames_ == 0 || !seal_error_.ok()) break;
      const uint8_t* payload = p_ + i * payload_;
      uint8_t* out = buffers_[i % ring].data();
      const size_t n = payload_;
      lock.unlock();
      Status s = mine.Seal(kSealedData, {payload, n}, out);
      mine.Skip(helpers - 1);
      lock.lock();
      if (!s.ok()) {
        seal_error_ = s;
        break;
      }
      sealed_in_[i % ring] = i + 1;
      cv_.notify_all();
    }
    --busy_;
    cv_.notify_all();
  }
}

}  // namespace gandiva::sealed
