// Where checkpoint streams go and come from: files (written under a temporary
// name, fsynced, then renamed, so a crash never leaves a half checkpoint under
// the final name), Unix stream sockets (the node controller's listener), the
// sealed bulk connection of a migration that the controller hands over on such
// a socket (sealed_io.cc), and memory (tests; a controller holding a stream).
#ifndef GANDIVA_CHECKPOINT_IO_H_
#define GANDIVA_CHECKPOINT_IO_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva::checkpoint {

class FreshState;  // fresh_state.h
class HeldChunks;  // held_chunks.h

class Sink {
 public:
  virtual ~Sink() = default;
  // Writes every byte of iov[0, count) (partial writes and EINTR handled).
  virtual Status WriteV(const struct iovec* iov, int count) = 0;
  // Publishes the stream (file: fsync, rename, fsync the directory). A sink
  // destroyed without Commit discards what it wrote where it can.
  virtual Status Commit() = 0;
  // "file /x/state.gdck", for messages.
  virtual std::string Describe() const = 0;
  // What the reader holds already (a migration's destination), or nullptr.
  virtual HeldChunks* held() { return nullptr; }
};

class Source {
 public:
  virtual ~Source() = default;
  // Reads up to n bytes into buf; 0 only at the end of the stream.
  virtual StatusOr<size_t> Read(void* buf, size_t n) = 0;
  // When the whole stream is already in memory (a mapped file, a buffer):
  // its bytes, which the reader then uses in place. Else empty.
  virtual std::span<const uint8_t> Mapped() const { return {}; }
  virtual std::string Describe() const = 0;
  // The fresh state kept for the stream this source brings (fresh_state.h),
  // or nullptr: by default the one the process keeps.
  virtual std::unique_ptr<FreshState> TakeFresh();
};

// durable=false skips the fsyncs (tests, benchmarks of the format alone).
StatusOr<std::unique_ptr<Sink>> OpenFileSink(const std::string& path, bool durable = true);
StatusOr<std::unique_ptr<Sink>> ConnectSocketSink(const std::string& socket_path);
StatusOr<std::unique_ptr<Source>> OpenFileSource(const std::string& path);
StatusOr<std::unique_ptr<Source>> ConnectSocketSource(const std::string& socket_path);
// A migration: connect to the controller's socket, take the bulk connection it
// hands over, and write (read) sealed frames on it.
StatusOr<std::unique_ptr<Sink>> ConnectSealedSink(const std::string& socket_path);
StatusOr<std::unique_ptr<Source>> ConnectSealedSource(const std::string& socket_path);
StatusOr<UniqueFd> ConnectUnixSocket(const std::string& path);

// A target string: "file:/abs/path", "unix:/abs/socket" or "sealed:/abs/socket".
StatusOr<std::unique_ptr<Sink>> OpenSink(const std::string& target);
StatusOr<std::unique_ptr<Source>> OpenSource(const std::string& target);

class MemorySink : public Sink {
 public:
  Status WriteV(const struct iovec* iov, int count) override;
  Status Commit() override { return Status::Ok(); }
  std::string Describe() const override { return "memory"; }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads from bytes it does not own.
class MemorySource : public Source {
 public:
  explicit MemorySource(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  StatusOr<size_t> Read(void* buf, size_t n) override;
  std::span<const uint8_t> Mapped() const override { return bytes_; }
  std::string Describe() const override { return "memory"; }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

// Writes all of data to fd (a socket gets MSG_NOSIGNAL: a closed peer is an
// error, never SIGPIPE). Exposed for controllers relaying streams.
Status WriteAll(int fd, const void* data, size_t n, bool socket);

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_IO_H_
