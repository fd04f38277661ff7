// The checkpoint stream of a migration, written or read by the job itself on
// the sealed bulk connection its controller hands over (see
// gandiva/sealed/sealed_channel.h): the state crosses no daemon.
#include <sys/socket.h>

#include "fresh_state.h"
#include "gandiva/sealed/sealed_channel.h"
#include "held_chunks.h"
#include "io.h"

namespace gandiva::checkpoint {

namespace {

// How long the job waits for the handoff, and for the peer to take or send
// more (its controller gives up sooner and shuts the connection down).
constexpr int kHandoffTimeoutMs = 30'000;
constexpr int kPeerTimeoutMs = 60'000;

class SealedSink : public Sink {
 public:
  SealedSink(sealed::Handoff h, std::string path, HeldChunks held)
      : writer_(std::move(h.connection), h.key, h.next_seq, kPeerTimeoutMs),
        path_(std::move(path)),
        held_(std::move(held)) {
    writer_.ApplyTestFlags(h.flags);
  }
  Status WriteV(const struct iovec* iov, int count) override {
    for (int i = 0; i < count; ++i)
      GD_RETURN_IF_ERROR(writer_.Write(iov[i].iov_base, iov[i].iov_len));
    return Status::Ok();
  }
  Status Commit() override { return writer_.Finish(); }
  std::string Describe() const override { return "the bulk connection handed over on " + path_; }
  HeldChunks* held() override { return &held_; }

 private:
  sealed::SealedWriter writer_;
  std::string path_;
  HeldChunks held_;
};

class SealedSource : public Source {
 public:
  SealedSource(sealed::Handoff h, std::string path, std::unique_ptr<FreshState> fresh)
      : reader_(std::move(h.connection), h.key, h.next_seq),
        path_(std::move(path)),
        fresh_(std::move(fresh)) {}
  StatusOr<size_t> Read(void* buf, size_t n) override {
    return reader_.Read(buf, n, kPeerTimeoutMs);
  }
  std::string Describe() const override { return "the bulk connection handed over on " + path_; }
  std::unique_ptr<FreshState> TakeFresh() override { return std::move(fresh_); }

 private:
  sealed::SealedReader reader_;
  std::string path_;
  std::unique_ptr<FreshState> fresh_;  // what this process told the writer it holds
};

StatusOr<sealed::Handoff> TakeHandoff(const std::string& socket_path) {
  GD_ASSIGN_OR_RETURN(UniqueFd control, ConnectUnixSocket(socket_path));
  return sealed::ReceiveHandoff(control.get(), kHandoffTimeoutMs);
}

}  // namespace

// The writer first reads what the reader holds already (its one reply).
StatusOr<std::unique_ptr<Sink>> ConnectSealedSink(const std::string& socket_path) {
  GD_ASSIGN_OR_RETURN(sealed::Handoff h, TakeHandoff(socket_path));
  GD_ASSIGN_OR_RETURN(std::vector<uint8_t> reply,
                      sealed::ReceiveReply(h.connection.get(), h.key, kPeerTimeoutMs));
  GD_ASSIGN_OR_RETURN(HeldChunks held, HeldChunks::Parse(reply));
  return std::unique_ptr<Sink>(new SealedSink(std::move(h), socket_path, std::move(held)));
}

// The reader first tells the writer what it holds already: the chunks of its
// fresh state, when it kept one (an empty list otherwise).
StatusOr<std::unique_ptr<Source>> ConnectSealedSource(const std::string& socket_path) {
  GD_ASSIGN_OR_RETURN(sealed::Handoff h, TakeHandoff(socket_path));
  std::unique_ptr<FreshState> fresh = TakeFreshState();
  const std::vector<uint8_t> manifest = fresh ? fresh->Manifest() : std::vector<uint8_t>();
  GD_RETURN_IF_ERROR(sealed::SendReply(h.connection.get(), h.key, manifest, kPeerTimeoutMs));
  return std::unique_ptr<Source>(new SealedSource(std::move(h), socket_path, std::move(fresh)));
}

}  // namespace gandiva::checkpoint
