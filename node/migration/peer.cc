// The real peer over a PeerLink and a bulk connection, and the fault-injecting
// wrapper; see peer.h. Wire names of job states are parsed only here.
#include "migration/peer.h"

#include <sys/socket.h>

#include "gandiva/common/clock.h"
#include "migration/bulk_channel.h"
#include "migration/peer_link.h"

namespace gandiva::controller {

using protocol::MessageType;

namespace {

class LinkPeer final : public Peer {
 public:
  LinkPeer(PeerInfo info, protocol::CurveClientKeys keys, int timeout_ms)
      : info_(std::move(info)),
        keys_(std::move(keys)),
        timeout_ms_(timeout_ms),
        link_(std::make_unique<PeerLink>(info_.endpoint, keys_, timeout_ms)) {}

  const std::string& name() const override { return info_.name; }

  StatusOr<uint64_t> Prepare(const protocol::Json& fields) override {
    auto prepared = Link().Call(MessageType::kMigratePrepare, fields);
    if (!prepared.ok()) return Named(prepared.status());
    return (*prepared)["job"].get<uint64_t>();
  }

  StatusOr<JobState> JobStateOf(uint64_t job) override {
    GD_ASSIGN_OR_RETURN(auto jobs, Link().Call(MessageType::kListJobs, {{"job", job}}));
    if (jobs["jobs"].empty())
      return NotFound(info_.name + " does not list job " + std::to_string(job));
    // The reply was validated against the schema (PeerLink::Call): the state is a JobState.
    return *protocol::EnumFromJson<JobState>(jobs["jobs"][0]["state"]);
  }

  // A fresh key for this migration goes over CURVE; the peer answers with the
  // port of its bulk connection, on the host we know it by.
  Status Begin(uint64_t job) override {
    GD_ASSIGN_OR_RETURN(key_, sealed::NewBulkKey());
    auto begun = Link().Call(MessageType::kMigrateBegin,
                             {{"job", job}, {"bulk_key", sealed::BulkKeyToHex(key_)}});
    if (!begun.ok()) return Named(begun.status());
    const int port = (*begun)["bulk_port"].get<int>();
    auto bulk = ConnectBulk(HostOfTcpEndpoint(info_.endpoint), port, key_, job, timeout_ms_);
    if (!bulk.ok()) return Named(bulk.status());
    bulk_ = std::move(*bulk);
    return Status::Ok();
  }

  Status HandOver(int job_socket, uint32_t test_flags) override {
    if (!bulk_) return FailedPrecondition("the bulk connection is not open");
    return sealed::SendHandoff(job_socket, bulk_->fd(), key_, bulk_->next_seq(), test_flags);
  }

  void EndBulk() override {
    if (bulk_) shutdown(bulk_->fd(), SHUT_RDWR);  // the job's end is the same connection
  }

  StatusOr<uint64_t> Commit(uint64_t job) override {
    auto committed = Link().Call(MessageType::kMigrateCommit, {{"job", job}});
    if (!committed.ok()) return Named(committed.status());
    return committed->value("bytes", uint64_t{0});
  }

  // Sent again by the source until answered (StartUntilAnswered): after a
  // call without an answer, the next goes on a fresh connection, so that a
  // late answer to the last one is not read as this one's.
  Status Start(uint64_t job) override {
    Status started = Link().Call(MessageType::kMigrateStart, {{"job", job}}).status();
    if (started.code() == StatusCode::kUnavailable) link_.reset();
    return started.ok() ? started : Named(started);
  }

  Status Abort(uint64_t job) override {
    EndBulk();
    PeerLink fresh(info_.endpoint, keys_, 3000);
    return fresh.Call(MessageType::kMigrateAbort, {{"job", job}}).status();
  }

 private:
  PeerLink& Link() {
    if (!link_) link_ = std::make_unique<PeerLink>(info_.endpoint, keys_, timeout_ms_);
    return *link_;
  }
  Status Named(const Status& s) const { return Status(s.code(), info_.name + ": " + s.message()); }

  PeerInfo info_;
  protocol::CurveClientKeys keys_;
  int timeout_ms_;
  std::unique_ptr<PeerLink> link_;  // reset after a call without an answer (Start)
  sealed::BulkKey key_{};
  std::unique_ptr<SealedWriter> bulk_;  // only its hello is written here
};

}  // namespace

std::unique_ptr<Peer> ConnectPeer(const PeerInfo& info, const protocol::CurveKeyPair& node_keys,
                                  int timeout_ms) {
  return std::make_unique<LinkPeer>(info, protocol::CurveClientKeys{node_keys, info.public_key},
                                    timeout_ms);
}

StatusOr<PeerFault> ParsePeerFault(const std::string& name) {
  if (name.empty()) return PeerFault::kNone;
  if (name == "corrupt-chunk") return PeerFault::kCorruptChunk;
  if (name == "flip-wire-bit") return PeerFault::kFlipWireBit;
  if (name == "cut-bulk") return PeerFault::kCutBulk;
  if (name == "drop-start") return PeerFault::kDropStart;
  return InvalidArgument("unknown --fault '" + name +
                         "' (known: corrupt-chunk, flip-wire-bit, cut-bulk, drop-start)");
}

Status FaultInjectionPeer::Start(uint64_t job) {
  if (fault_ == PeerFault::kDropStart) {
    const uint64_t now = MonotonicNowNs();
    if (first_start_ns_ == 0) first_start_ns_ = now;
    if (now - first_start_ns_ < kDropStartNs)
      return Unavailable("migrate_start to " + name() +
                         " was lost on the way (--fault drop-start)");
  }
  return base_->Start(job);
}

Status FaultInjectionPeer::HandOver(int job_socket, uint32_t test_flags) {
  if (fault_ == PeerFault::kCorruptChunk) test_flags |= sealed::kHandoffCorruptPlain;
  if (fault_ == PeerFault::kFlipWireBit) test_flags |= sealed::kHandoffTamperSealed;
  if (fault_ == PeerFault::kCutBulk) test_flags |= sealed::kHandoffCutMidway;
  return base_->HandOver(job_socket, test_flags);
}

}  // namespace gandiva::controller
