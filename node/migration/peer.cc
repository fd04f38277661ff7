// The real peer over a PeerLink, and the fault-injecting
// wrapper; see peer.h. Wire names of job states are parsed only here.
#include "migration/peer.h"

#include "migration/peer_link.h"

namespace gandiva::controller {

using protocol::MessageType;

namespace {

class LinkPeer final : public Peer {
 public:
  LinkPeer(PeerInfo info, protocol::CurveClientKeys keys, int timeout_ms)
      : info_(std::move(info)), keys_(std::move(keys)), link_(info_.endpoint, keys_, timeout_ms) {}

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

  Status Begin(uint64_t job) override {
    return link_.Call(MessageType::kMigrateBegin, {{"job", job}}).status();
  }

  Status SendChunk(uint64_t job, uint64_t seq, std::string_view bytes, int window) override {
    GD_RETURN_IF_ERROR(link_.Send(MessageType::kMigrateChunk, {{"job", job}, {"seq", seq}}, bytes));
    while (link_.outstanding() >= window) GD_RETURN_IF_ERROR(link_.Receive().status());
    return Status::Ok();
  }

  Status Flush() override {
    while (link_.outstanding() > 0) GD_RETURN_IF_ERROR(link_.Receive().status());
    return Status::Ok();
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

  PeerInfo info_;
  protocol::CurveClientKeys keys_;
  PeerLink link_;
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
  return InvalidArgument("unknown --fault '" + name + "' (known: corrupt-chunk)");
}

Status FaultInjectionPeer::SendChunk(uint64_t job, uint64_t seq, std::string_view bytes,
                                     int window) {
  if (fault_ != PeerFault::kCorruptChunk || seq != 0 || bytes.empty())
    return base_->SendChunk(job, seq, bytes, window);
  std::string corrupt(bytes);
  corrupt[corrupt.size() / 2] ^= 0x40;
  return base_->SendChunk(job, seq, corrupt, window);
}

}  // namespace gandiva::controller
