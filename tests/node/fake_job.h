// Plays a training job's side of a control block for the node's unit tests:
// parks when asked to suspend, runs when resumed, and serves checkpoint and
// restore requests through the file, Unix socket or handed-over sealed bulk
// connection the node names, as the job runtime does. Its "state" is a byte
// string.
#ifndef GANDIVA_TESTS_NODE_FAKE_JOB_H_
#define GANDIVA_TESTS_NODE_FAKE_JOB_H_

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/contract/control_block.h"
#include "gandiva/sealed/sealed_channel.h"

namespace gandiva::controller::testing {

inline std::shared_ptr<runtime::ControlBlock> NewControlBlock(uint64_t job) {
  std::shared_ptr<runtime::ControlBlock> cb(new runtime::ControlBlock());
  runtime::InitControlBlock(cb.get(), job, 3'000'000'000ull, "test");
  return cb;
}

class FakeJob {
 public:
  FakeJob(std::shared_ptr<runtime::ControlBlock> cb, std::string state,
          std::chrono::milliseconds load_delay = std::chrono::milliseconds(0))
      : cb_(std::move(cb)), state_(std::move(state)), load_delay_(load_delay) {
    cb_->phase.store(runtime::kPhaseRunning);
    cb_->registered_states.store(1);  // its byte string
    thread_ = std::thread([this] { Loop(); });
  }
  ~FakeJob() {
    stop_ = true;
    thread_.join();
  }
  std::string state() const {
    std::lock_guard lock(mu_);
    return state_;
  }
  uint32_t phase() const { return cb_->phase.load(); }
  // Its save fails before it connects anywhere, as the runtime's does when a
  // section refuses (or, but for the node's up-front check, nothing is registered).
  std::atomic<bool> refuse_save{false};

 private:
  void SetPhase(runtime::Phase phase) {
    cb_->phase.store(phase, std::memory_order_release);
    (phase == runtime::kPhaseParked ? cb_->parked_at_ns : cb_->resumed_at_ns)
        .store(MonotonicNowNs());
    runtime::FutexWakeAll(&cb_->phase);
  }
  static int Connect(const std::string& path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  // "sealed:PATH": take the bulk connection the node hands over on PATH.
  static std::optional<sealed::Handoff> TakeHandoff(const std::string& target) {
    int fd = Connect(target.substr(7));
    if (fd < 0) return std::nullopt;
    auto handoff = sealed::ReceiveHandoff(fd, 10'000);
    close(fd);
    if (!handoff.ok()) return std::nullopt;
    return std::move(*handoff);
  }
  bool Save(const std::string& target) {
    const std::string s = state();
    if (target.rfind("file:", 0) == 0) {
      std::ofstream(target.substr(5), std::ios::binary) << s;
      return true;
    }
    if (target.rfind("sealed:", 0) == 0) {
      auto h = TakeHandoff(target);
      if (!h) return false;
      sealed::SealedWriter writer(std::move(h->connection), h->key, h->next_seq, 10'000);
      writer.ApplyTestFlags(h->flags);
      return writer.Write(s.data(), s.size()).ok() && writer.Finish().ok();
    }
    int fd = Connect(target.substr(5));
    if (fd < 0) return false;
    bool ok = send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
    close(fd);
    return ok;
  }
  bool Load(const std::string& target) {
    std::string got;
    if (target.rfind("sealed:", 0) == 0) {
      auto h = TakeHandoff(target);
      if (!h) return false;
      sealed::SealedReader reader(std::move(h->connection), h->key, h->next_seq);
      char buf[1 << 16];
      for (;;) {
        auto n = reader.Read(buf, sizeof buf, 10'000);
        if (!n.ok()) return false;
        if (*n == 0) break;
        got.append(buf, *n);
      }
    } else {
      int fd = Connect(target.substr(5));
      if (fd < 0) return false;
      char buf[1 << 16];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) got.append(buf, n);
      close(fd);
    }
    std::this_thread::sleep_for(load_delay_);
    std::lock_guard lock(mu_);
    state_ = std::move(got);
    return true;
  }
  void Transfer(uint32_t request) {
    const std::string target = cb_->transfer_target;
    cb_->transfer_state.store(runtime::kTransferBusy);
    const bool refused = request == runtime::kRequestCheckpoint && refuse_save;
    const bool ok =
        !refused && (request == runtime::kRequestCheckpoint ? Save(target) : Load(target));
    cb_->transfer_bytes.store(state().size());
    if (!ok)
      std::strcpy(cb_->transfer_error,
                  refused ? "fake job: refused to save" : "fake job: transfer failed");
    // Back to parked, unless the node asked for something else meanwhile (as the runtime does).
    uint32_t expected = request;
    cb_->request.compare_exchange_strong(expected, runtime::kRequestSuspend);
    cb_->transfer_state.store(ok ? runtime::kTransferDone : runtime::kTransferFailed);
    runtime::FutexWakeAll(&cb_->transfer_state);
  }
  void Loop() {
    while (!stop_) {
      const uint32_t request = cb_->request.load(std::memory_order_acquire);
      const uint32_t phase = cb_->phase.load();
      if (request == runtime::kRequestRun && phase == runtime::kPhaseParked) {
        SetPhase(runtime::kPhaseRunning);
      } else if (request != runtime::kRequestRun && phase == runtime::kPhaseRunning) {
        SetPhase(runtime::kPhaseParked);  // at its next boundary
      } else if (phase == runtime::kPhaseParked &&
                 (request == runtime::kRequestCheckpoint || request == runtime::kRequestRestore)) {
        Transfer(request);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  std::shared_ptr<runtime::ControlBlock> cb_;
  mutable std::mutex mu_;
  std::string state_;
  std::chrono::milliseconds load_delay_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gandiva::controller::testing

#endif  // GANDIVA_TESTS_NODE_FAKE_JOB_H_
