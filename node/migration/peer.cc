// The real peer over a PeerLink and a bulk channel, and the fault-injecting
// wrapper; see peer.h. Wire names of job states are parsed only here.
#include "migration/peer.h"

#include "migration/bulk_channel.h"
#include "migration/peer_link.h"

namespace gandiva::controller {

using protocol::MessageType;

namespace {

class LinkPeer final : public Peer {
 public:
  LinkPeer(PeerInfo info, protocol::CurveClientKeys keys, int timeout_ms, PeerFault wire_fault)
      : info_(std::move(info)),
        keys_(std::move(keys)),
        timeout_ms_(timeout_ms),
        wire_fault_(wire_fault),
        link_(info_.endpoint, keys_, timeout_ms) {}

  const std::string& name() const override { return info_.name; }

  StatusOr<uint64_t> Prepare(const protocol::Json& fields) override {
    auto prepared = link_.Call(MessageType::kMigratePrepare, fields);
    if (!prepared.ok()) return Named(prepared.status());
    return (*prepared)["job"].get<uint64_t>();
  }

  StatusOr<JobState> JobStateOf(uint64_t job) override {
    GD_ASSIGN_OR_RETURN(auto jobs, link_.Call(MessageType::kListJobs, {{"job", job}}));
    if (jobs["jobs"].empty())
      return NotFound(info_.name + " does not list job " + std::to_string(job));
    // The reply was validated against the schema (PeerLink::Call): the state is a JobState.
    return *protocol::EnumFromJson<JobState>(jobs["jobs"][0]["state"]);
  }

  // A fresh key for this migration goes over CURVE; the peer answers with the
  // port of its bulk channel, on the host we know it by.
  Status Begin(uint64_t job) override {
    GD_ASSIGN_OR_RETURN(BulkKey key, NewBulkKey());
    auto begun =
        link_.Call(MessageType::kMigrateBegin, {{"job", job}, {"bulk_key", BulkKeyToHex(key)}});
    if (!begun.ok()) return Named(begun.status());
    const int port = (*begun)["bulk_port"].get<int>();
    auto sender =
        BulkSender::Connect(HostOfTcpEndpoint(info_.endpoint), port, key, job, timeout_ms_);
    if (!sender.ok()) return Named(sender.status());
    bulk_ = std::move(*sender);
    if (wire_fault_ == PeerFault::kFlipWireBit) bulk_->TamperWithNextFrame();
    return Status::Ok();
  }

  Status SendChunk(uint64_t job, uint64_t, std::string_view bytes) override {
    if (!bulk_) return FailedPrecondition("the bulk channel is not open");
    Status sent = bulk_->Send({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    return sent.ok() ? sent : WhyPeerStopped(job, sent);
  }

  Status Flush() override {
    if (!bulk_) return FailedPrecondition("the bulk channel is not open");
    return bulk_->Finish();
  }

  StatusOr<uint64_t> Commit(uint64_t job) override {
    auto committed = link_.Call(MessageType::kMigrateCommit, {{"job", job}});
    if (!committed.ok()) return Named(committed.status());
    return committed->value("bytes", uint64_t{0});
  }

  Status Start(uint64_t job) override {
    return link_.Call(MessageType::kMigrateStart, {{"job", job}}).status();
  }

  Status Abort(uint64_t job) override {
    PeerLink fresh(info_.endpoint, keys_, 3000);
    return fresh.Call(MessageType::kMigrateAbort, {{"job", job}}).status();
  }

 private:
  Status Named(const Status& s) const { return Status(s.code(), info_.name + ": " + s.message()); }

  // The destination closed the bulk channel: it stopped reading because a frame
  // did not open, or its job went away. Its commit step says which.
  Status WhyPeerStopped(uint64_t job, const Status& local) {
    if (local.code() != StatusCode::kUnavailable) return Named(local);
    auto reason = link_.Call(MessageType::kMigrateCommit, {{"job", job}});
    return Named(reason.ok() ? local : reason.status());
  }

  PeerInfo info_;
  protocol::CurveClientKeys keys_;
  int timeout_ms_;
  PeerFault wire_fault_;
  PeerLink link_;
  std::unique_ptr<BulkSender> bulk_;
};

}  // namespace

std::unique_ptr<Peer> ConnectPeer(const PeerInfo& info, const protocol::CurveKeyPair& node_keys,
                                  int timeout_ms, PeerFault wire_fault) {
  return std::make_unique<LinkPeer>(info, protocol::CurveClientKeys{node_keys, info.public_key},
                                    timeout_ms, wire_fault);
}

StatusOr<PeerFault> ParsePeerFault(const std::string& name) {
  if (name.empty()) return PeerFault::kNone;
  if (name == "corrupt-chunk") return PeerFault::kCorruptChunk;
  if (name == "flip-wire-bit") return PeerFault::kFlipWireBit;
  return InvalidArgument("unknown --fault '" + name + "' (known: corrupt-chunk, flip-wire-bit)");
}

Status FaultInjectionPeer::SendChunk(uint64_t job, uint64_t seq, std::string_view bytes) {
  if (fault_ != PeerFault::kCorruptChunk || seq != 0 || bytes.empty())
    return base_->SendChunk(job, seq, bytes);
  std::string corrupt(bytes);
  corrupt[corrupt.size() / 2] ^= 0x40;
  return base_->SendChunk(job, seq, corrupt);
}

}  // namespace gandiva::controller
