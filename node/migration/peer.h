// The node a job migrates to, as the migration's source sees it: a small
// interface over the steps of the wire protocol, so that the source's state
// machine can be tested against a fake peer. LinkPeer is the real one: its
// steps go over an authenticated PeerLink (CURVE), the state over a sealed bulk
// connection (bulk_channel.h) whose key that link carries and which the source
// job writes into itself; FaultInjectionPeer
// wraps any peer to make test-only faults happen on the way (like leveldb's
// FaultInjectionTestEnv).
//
// Thread-safety: a Peer is used by one migration worker at a time.
#ifndef GANDIVA_NODE_MIGRATION_PEER_H_
#define GANDIVA_NODE_MIGRATION_PEER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/status.h"
#include "jobs/job.h"
#include "migration/peers_file.h"

namespace gandiva::controller {

class Peer {
 public:
  virtual ~Peer() = default;
  virtual const std::string& name() const = 0;
  // migrate_prepare: the peer starts the job (held warm); returns its job id there.
  virtual StatusOr<uint64_t> Prepare(const protocol::Json& fields) = 0;
  // The state of the peer's job (list_jobs).
  virtual StatusOr<JobState> JobStateOf(uint64_t job) = 0;
  // migrate_begin: the peer's job starts reading state; the bulk connection opens.
  virtual Status Begin(uint64_t job) = 0;
  // Hands the bulk connection to the source job on `job_socket` (the Unix
  // connection of its "sealed:" transfer); the job then writes its state into
  // it. test_flags: sealed::kHandoff* (fault tests), else 0.
  virtual Status HandOver(int job_socket, uint32_t test_flags) = 0;
  // Shuts the bulk connection down once the source job stopped writing into it
  // (it failed): the peer's job sees the stream end at once, not after its
  // read deadline, and migrate_commit answers with its reason.
  virtual void EndBulk() = 0;
  // migrate_commit: the job verified and loaded the stream; returns the bytes it loaded.
  virtual StatusOr<uint64_t> Commit(uint64_t job) = 0;
  virtual Status Start(uint64_t job) = 0;
  // Drops the peer's copy and shuts the bulk connection down (a job still
  // writing into it stops at once). Used after a failure, so it does not rely
  // on the connection the other steps used (that may be the broken part).
  virtual Status Abort(uint64_t job) = 0;
};

// The real peer, over ZeroMQ with CURVE and the sealed bulk connection; a peer
// silent for timeout_ms has failed.
std::unique_ptr<Peer> ConnectPeer(const PeerInfo& info, const protocol::CurveKeyPair& node_keys,
                                  int timeout_ms);

// Test-only faults, named by gandivad's --fault flag, made by the source job
// as the handoff tells it: kCorruptChunk flips a bit of the first data frame
// before it is sealed (the destination job's checksums catch it);
// kFlipWireBit flips one after it is sealed, as a device on the path could
// (the bulk channel's authentication catches it); kCutBulk cuts the bulk
// connection after that frame, as a network could. kDropStart loses every
// migrate_start of a migration for kDropStartNs from its first, as a network
// could, unsent: the window in which a test restarts either node between the
// commit and the start.
enum class PeerFault { kNone, kCorruptChunk, kFlipWireBit, kCutBulk, kDropStart };
inline constexpr uint64_t kDropStartNs = 5'000'000'000;
StatusOr<PeerFault> ParsePeerFault(const std::string& name);

// Passes every step on to `base`, and makes `fault` happen on the way.
class FaultInjectionPeer final : public Peer {
 public:
  FaultInjectionPeer(std::unique_ptr<Peer> base, PeerFault fault)
      : base_(std::move(base)), fault_(fault) {}
  const std::string& name() const override { return base_->name(); }
  StatusOr<uint64_t> Prepare(const protocol::Json& fields) override {
    return base_->Prepare(fields);
  }
  StatusOr<JobState> JobStateOf(uint64_t job) override { return base_->JobStateOf(job); }
  Status Begin(uint64_t job) override { return base_->Begin(job); }
  Status HandOver(int job_socket, uint32_t test_flags) override;
  void EndBulk() override { base_->EndBulk(); }
  StatusOr<uint64_t> Commit(uint64_t job) override { return base_->Commit(job); }
  Status Start(uint64_t job) override;
  Status Abort(uint64_t job) override { return base_->Abort(job); }

 private:
  std::unique_ptr<Peer> base_;
  PeerFault fault_;
  uint64_t first_start_ns_ = 0;  // kDropStart: when the first migrate_start was lost
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_PEER_H_
