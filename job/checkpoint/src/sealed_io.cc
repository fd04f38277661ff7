// The checkpoint stream of a migration, written or read by the job itself on
// the sealed bulk connection its controller hands over (see
// gandiva/contract/sealed_channel.h): the state crosses no daemon.
#include <sys/socket.h>

#include "gandiva/contract/sealed_channel.h"
#include "io.h"

namespace gandiva::checkpoint {

namespace {

// How long the job waits for the handoff, and for the peer to take or send
// more (its controller gives up sooner and shuts the connection down).
constexpr int kHandoffTimeoutMs = 30'000;
constexpr int kPeerTimeoutMs = 60'000;

class SealedSink : public Sink {
 public:
  SealedSink(sealed::Handoff h, std::string path)
      : writer_(std::move(h.connection), h.key, h.next_seq, kPeerTimeoutMs),
        path_(std::move(path)) {
    writer_.ApplyTestFlags(h.flags);
  }
  Status WriteV(const struct iovec* iov, int count) override {
    for (int i = 0; i < count; ++i)
      GD_RETURN_IF_ERROR(writer_.Write(iov[i].iov_base, iov[i].iov_len));
    return Status::Ok();
  }
  Status Commit() override { return writer_.Finish(); }
  std::string Describe() const override { return "the bulk connection handed over on " + path_; }

 private:
  sealed::SealedWriter writer_;
  std::string path_;
};

class SealedSource : public Source {
 public:
  SealedSource(sealed::Handoff h, std::string path)
      : reader_(std::move(h.connection), h.key, h.next_seq), path_(std::move(path)) {}
  StatusOr<size_t> Read(void* buf, size_t n) override {
    return reader_.Read(buf, n, kPeerTimeoutMs);
  }
  std::string Describe() const override { return "the bulk connection handed over on " + path_; }

 private:
  sealed::SealedReader reader_;
  std::string path_;
};

StatusOr<sealed::Handoff> TakeHandoff(const std::string& socket_path) {
  GD_ASSIGN_OR_RETURN(UniqueFd control, ConnectUnixSocket(socket_path));
  return sealed::ReceiveHandoff(control.get(), kHandoffTimeoutMs);
}

}  // namespace

StatusOr<std::unique_ptr<Sink>> ConnectSealedSink(const std::string& socket_path) {
  GD_ASSIGN_OR_RETURN(sealed::Handoff h, TakeHandoff(socket_path));
  return std::unique_ptr<Sink>(new SealedSink(std::move(h), socket_path));
}

StatusOr<std::unique_ptr<Source>> ConnectSealedSource(const std::string& socket_path) {
  GD_ASSIGN_OR_RETURN(sealed::Handoff h, TakeHandoff(socket_path));
  return std::unique_ptr<Source>(new SealedSource(std::move(h), socket_path));
}

}  // namespace gandiva::checkpoint
