// SaveState / RestoreState: the registered state to and from a target, for
// the job runtime (controller requests, GANDIVA_RESTORE) and gd_checkpoint.
#include "gandiva/checkpoint/state_transfer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "fresh_state.h"
#include "gandiva/checkpoint/registry.h"
#include "gandiva/common/helper_thread.h"
#include "io.h"
#include "stream.h"

namespace gandiva::checkpoint {
namespace {

// One transfer at a time per process: a job's own periodic gd_checkpoint and a
// controller's request must not interleave their save functions.
std::mutex& TransferMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

Metadata MakeMetadata(uint64_t job_id) {
  Metadata m;
  m.emplace_back("format", "gandiva-checkpoint");
  m.emplace_back("job_id", std::to_string(job_id));
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  m.emplace_back(
      "created_unix_ms",
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) m.emplace_back("host", host);
  m.emplace_back("pid", std::to_string(::getpid()));
  return m;
}

// A checkpoint of nothing would "succeed" and a restore or migration of it would
// start the job over from scratch: refuse it, saying what to register.
Status NothingRegistered(uint64_t job_id) {
  const std::string who = job_id ? "job " + std::to_string(job_id) : "this process";
  return FailedPrecondition(who +
                            " registered no state: call gandiva.torch.register(model, optimizer, "
                            "...) or gandiva.register_state() / gd_register_state() before its "
                            "first boundary");
}

// A restored stream's memory, and its source if that is a mapped file.
struct KeptStream {
  VerifiedStream stream;
  std::unique_ptr<Source> source;
};

std::mutex g_kept_mu;
std::unique_ptr<KeptStream> g_kept;  // guarded by g_kept_mu
std::atomic<bool> g_has_kept{false};

// Unmaps on a thread of its own; without one, here.
void FreeOffThePath(std::unique_ptr<KeptStream> kept) {
  std::thread unmapper;
  if (StartHelperThread(&unmapper, [k = std::move(kept)]() mutable { k.reset(); }))
    unmapper.detach();
}

}  // namespace

Status SaveState(const std::string& target, uint64_t job_id, uint64_t* bytes) {
  *bytes = 0;
  std::lock_guard<std::mutex> lock(TransferMutex());
  const auto entries = StateRegistry::Global().Snapshot();
  if (entries.empty()) return NothingRegistered(job_id);
  GD_RETURN_IF_ERROR(CheckSaveable(entries));  // refused before the target is opened
  GD_ASSIGN_OR_RETURN(std::unique_ptr<Sink> sink, OpenSink(target));
  return WriteStream(sink.get(), entries, WithSectionList(MakeMetadata(job_id), entries), bytes);
}

Status ReserveForRestore(uint64_t* bytes) {
  *bytes = 0;
  std::lock_guard<std::mutex> lock(TransferMutex());
  const auto entries = StateRegistry::Global().Snapshot();
  if (entries.empty()) return Status::Ok();
  // The save functions run once: into the memory kept, which grows to fit.
  GD_ASSIGN_OR_RETURN(std::unique_ptr<FreshState> fresh,
                      FreshState::Capture(entries, MakeMetadata(0)));
  *bytes = fresh->stream_bytes();
  KeepFreshState(std::move(fresh));
  return Status::Ok();
}

Status RestoreState(const std::string& target, uint64_t* bytes, RestoreCheck check,
                    RestoredMemory memory) {
  *bytes = 0;
  std::lock_guard<std::mutex> lock(TransferMutex());
  GD_ASSIGN_OR_RETURN(std::unique_ptr<Source> source, OpenSource(target));
  const auto entries = StateRegistry::Global().Snapshot();
  // A stream that arrives (a migration's warm copy) is loaded as it arrives,
  // when a failure may half-load the job; a mapped file is verified first, or
  // checked ahead of its loads on a second thread.
  const bool live = check == RestoreCheck::kWhileLoading && source->Mapped().empty();
  StatusOr<VerifiedStream> read =
      live ? LoadWhileReading(source.get(), entries) : ReadStream(source.get(), check, entries);
  (void)TakeFreshState();  // one the stream did not take (a file needs none)
  GD_RETURN_IF_ERROR(read.status());
  VerifiedStream stream = std::move(*read);
  *bytes = stream.stream_bytes;
  Status loaded = live ? Status::Ok() : LoadStream(stream, entries);
  if (stream.stream_bytes < (64u << 20)) return loaded;  // freed here: little to unmap
  // A socket is closed now (its peer may wait for that); the memory is given
  // back off the path that a migration's downtime, or a restored job's first
  // iteration, waits on.
  if (source->Mapped().empty()) source.reset();
  auto kept = std::make_unique<KeptStream>(KeptStream{std::move(stream), std::move(source)});
  if (memory == RestoredMemory::kFreeNow) {
    FreeOffThePath(std::move(kept));
  } else {
    std::lock_guard lock(g_kept_mu);
    if (g_kept) FreeOffThePath(std::move(g_kept));  // one not freed yet: now
    g_kept = std::move(kept);
    g_has_kept.store(true, std::memory_order_release);
  }
  return loaded;
}

void FreeRestoredMemory() {
  if (!g_has_kept.load(std::memory_order_acquire)) return;
  std::lock_guard lock(g_kept_mu);
  g_has_kept.store(false, std::memory_order_relaxed);
  if (g_kept) FreeOffThePath(std::move(g_kept));
}

}  // namespace gandiva::checkpoint
