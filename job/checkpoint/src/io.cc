// File, Unix-socket and memory sinks and sources for checkpoint streams.
#include "io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fresh_state.h"
#include "gandiva/common/private_files.h"
#include "gandiva/common/unique_fd.h"

namespace gandiva::checkpoint {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Writes the whole iovec array, resuming after partial writes and EINTR.
Status WriteVAll(int fd, const struct iovec* in, int count, bool socket, const std::string& what) {
  struct iovec iov[8];
  if (count > 8) return Internal("too many iovecs");
  std::copy(in, in + count, iov);
  struct iovec* cur = iov;
  while (count > 0) {
    ssize_t n;
    if (socket) {
      struct msghdr msg {};
      msg.msg_iov = cur;
      msg.msg_iovlen = count;
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    } else {
      n = ::writev(fd, cur, count);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable(Errno("write to " + what));
    }
    size_t done = static_cast<size_t>(n);
    while (count > 0 && done >= cur->iov_len) {
      done -= cur->iov_len;
      ++cur;
      --count;
    }
    if (count > 0) {
      cur->iov_base = static_cast<char*>(cur->iov_base) + done;
      cur->iov_len -= done;
    }
  }
  return Status::Ok();
}

// Makes the missing directories of `dir` owner-only: a checkpoint is restored
// through code that trusts what it reads (the Python package unpickles it), so
// no one else may read or replace it. Existing ones are left as they are.
Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return Status::Ok();
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      return Unavailable(Errno("cannot create directory " + partial));
  }
  return Status::Ok();
}

// The directory a checkpoint goes into, opened and checked: ours (or root's)
// and writable by no one else, who could otherwise swap the checkpoint for one
// of their own between its save and its restore.
StatusOr<UniqueFd> OpenCheckpointDir(const std::string& dir) {
  const std::string shown = dir.empty() ? "." : dir;
  UniqueFd fd(::open(shown.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOTDIR) return FailedPrecondition(shown + " is not a directory");
    return Unavailable(Errno("cannot open directory " + shown));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Unavailable(Errno("stat " + shown));
  Status trusted = CheckDirStat(st, shown, ::geteuid(), /*leaf=*/true);
  if (!trusted.ok())
    return Status(trusted.code(), "will not write a checkpoint there: " + trusted.message());
  return fd;
}

// A checkpoint's CRCs catch damage, not a forgery: what a restore loads (and
// the Python package unpickles) must come from a file only this user (or
// root) could have written.
Status CheckRestorable(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(path + " is not a regular file");
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return PermissionDenied("will not restore " + path + ": it belongs to uid " +
                            std::to_string(st.st_uid) +
                            ", not to this user or root, who wrote what it would load");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return PermissionDenied("will not restore " + path +
                            ": users other than its owner may write it, so anyone could have "
                            "written what it would load");
  return Status::Ok();
}

class FileSink : public Sink {
 public:
  FileSink(UniqueFd fd, UniqueFd dir_fd, std::string tmp_name, std::string name, std::string path,
           bool durable)
      : fd_(std::move(fd)),
        dir_fd_(std::move(dir_fd)),
        tmp_name_(std::move(tmp_name)),
        name_(std::move(name)),
        path_(std::move(path)),
        durable_(durable) {}
  ~FileSink() override {
    if (!committed_) ::unlinkat(dir_fd_.get(), tmp_name_.c_str(), 0);
  }
  Status WriteV(const struct iovec* iov, int count) override {
    return WriteVAll(fd_.get(), iov, count, false, tmp_name_);
  }
  Status Commit() override {
    if (durable_ && ::fsync(fd_.get()) != 0) return Unavailable(Errno("fsync " + tmp_name_));
    if (::close(fd_.Release()) != 0) return Unavailable(Errno("close " + tmp_name_));
    // In the directory that was checked, whatever has been renamed since.
    if (::renameat(dir_fd_.get(), tmp_name_.c_str(), dir_fd_.get(), name_.c_str()) != 0)
      return Unavailable(Errno("rename " + tmp_name_ + " to " + path_));
    committed_ = true;
    // The rename itself is durable only once the directory is synced.
    if (durable_) ::fsync(dir_fd_.get());
    return Status::Ok();
  }
  std::string Describe() const override { return "file " + path_; }

 private:
  UniqueFd fd_, dir_fd_;
  std::string tmp_name_, name_, path_;
  bool durable_;
  bool committed_ = false;
};

class SocketSink : public Sink {
 public:
  SocketSink(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  Status WriteV(const struct iovec* iov, int count) override {
    return WriteVAll(fd_.get(), iov, count, true, "unix socket " + path_);
  }
  Status Commit() override {
    // Closing tells the listener the stream is complete; a listener that
    // wants proof reads the end frame.
    ::shutdown(fd_.get(), SHUT_WR);
    fd_.Reset();
    return Status::Ok();
  }
  std::string Describe() const override { return "unix socket " + path_; }

 private:
  UniqueFd fd_;
  std::string path_;
};

class MappedFileSource : public Source {
 public:
  MappedFileSource(const uint8_t* data, size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}
  ~MappedFileSource() override {
    if (size_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  StatusOr<size_t> Read(void* buf, size_t n) override {
    n = std::min(n, size_ - pos_);
    std::memcpy(buf, data_ + pos_, n);
    pos_ += n;
    return n;
  }
  std::span<const uint8_t> Mapped() const override { return {data_, size_}; }
  std::string Describe() const override { return "file " + path_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string path_;
};

class FdSource : public Source {
 public:
  FdSource(UniqueFd fd, std::string what) : fd_(std::move(fd)), what_(std::move(what)) {}
  StatusOr<size_t> Read(void* buf, size_t n) override {
    for (;;) {
      ssize_t got = ::read(fd_.get(), buf, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return Unavailable(Errno("read from " + what_));
    }
  }
  std::string Describe() const override { return what_; }

 private:
  UniqueFd fd_;
  std::string what_;
};

}  // namespace

std::unique_ptr<FreshState> Source::TakeFresh() { return TakeFreshState(); }

StatusOr<UniqueFd> ConnectUnixSocket(const std::string& path) {
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return InvalidArgument("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Unavailable(Errno("socket"));
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return Unavailable(Errno("cannot connect to unix socket " + path));
  return fd;
}

Status WriteAll(int fd, const void* data, size_t n, bool socket) {
  struct iovec iov = {const_cast<void*>(data), n};
  return WriteVAll(fd, &iov, 1, socket, "fd " + std::to_string(fd));
}

StatusOr<std::unique_ptr<Sink>> OpenFileSink(const std::string& path, bool durable) {
  if (path.empty()) return InvalidArgument("empty checkpoint path");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? ""
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return InvalidArgument("checkpoint path " + path + " names a directory");
  GD_RETURN_IF_ERROR(MakeDirs(dir));
  GD_ASSIGN_OR_RETURN(UniqueFd dir_fd, OpenCheckpointDir(dir));
  // A dot name the reader never mistakes for a checkpoint, unique per process;
  // one a killed save of an earlier process with this pid left is replaced, and
  // nothing is written through a link in its place.
  const std::string tmp_name = "." + base + ".tmp." + std::to_string(::getpid());
  ::unlinkat(dir_fd.get(), tmp_name.c_str(), 0);
  GD_ASSIGN_OR_RETURN(UniqueFd fd, CreateFileAt(dir_fd.get(), tmp_name, O_WRONLY, 0600,
                                                (dir.empty() ? "" : dir + "/") + tmp_name));
  return std::unique_ptr<Sink>(
      new FileSink(std::move(fd), std::move(dir_fd), tmp_name, base, path, durable));
}

StatusOr<std::unique_ptr<Sink>> ConnectSocketSink(const std::string& socket_path) {
  GD_ASSIGN_OR_RETURN(UniqueFd fd, ConnectUnixSocket(socket_path));
  // Bigger kernel buffers mean fewer wake-ups per GiB; the kernel caps the value.
  int size = 4 << 20;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  return std::unique_ptr<Sink>(new SocketSink(std::move(fd), socket_path));
}

StatusOr<std::unique_ptr<Source>> OpenFileSource(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return NotFound("no checkpoint at " + path);
    return Unavailable(Errno("cannot open " + path));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Unavailable(Errno("stat " + path));
  GD_RETURN_IF_ERROR(CheckRestorable(st, path));
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) return std::unique_ptr<Source>(new MappedFileSource(nullptr, 0, path));
  // Mapped: verification and loading read the page cache in place instead of
  // copying the whole stream into a buffer first. Not pre-faulted
  // (MAP_POPULATE): faulting it in as the checks read it was 25-30 ms per GiB
  // faster here, and a check ahead of the load (ChunkChecker) then does it on
  // its own thread.
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) {
    // Not mappable (a pipe, a special file): read it as a stream.
    return std::unique_ptr<Source>(new FdSource(std::move(fd), "file " + path));
  }
  ::madvise(p, size, MADV_SEQUENTIAL);
  return std::unique_ptr<Source>(new MappedFileSource(static_cast<uint8_t*>(p), size, path));
}

StatusOr<std::unique_ptr<Source>> ConnectSocketSource(const std::string& socket_path) {
  GD_ASSIGN_OR_RETURN(UniqueFd fd, ConnectUnixSocket(socket_path));
  int size = 4 << 20;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  return std::unique_ptr<Source>(new FdSource(std::move(fd), "unix socket " + socket_path));
}

StatusOr<std::unique_ptr<Sink>> OpenSink(const std::string& target) {
  if (target.rfind("file:", 0) == 0) return OpenFileSink(target.substr(5));
  if (target.rfind("unix:", 0) == 0) return ConnectSocketSink(target.substr(5));
  if (target.rfind("sealed:", 0) == 0) return ConnectSealedSink(target.substr(7));
  return InvalidArgument("checkpoint target must be file:PATH, unix:PATH or sealed:PATH, got '" +
                         target + "'");
}

StatusOr<std::unique_ptr<Source>> OpenSource(const std::string& target) {
  if (target.rfind("file:", 0) == 0) return OpenFileSource(target.substr(5));
  if (target.rfind("unix:", 0) == 0) return ConnectSocketSource(target.substr(5));
  if (target.rfind("sealed:", 0) == 0) return ConnectSealedSource(target.substr(7));
  return InvalidArgument("checkpoint source must be file:PATH, unix:PATH or sealed:PATH, got '" +
                         target + "'");
}

Status MemorySink::WriteV(const struct iovec* iov, int count) {
  for (int i = 0; i < count; ++i) {
    const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
    bytes_.insert(bytes_.end(), p, p + iov[i].iov_len);
  }
  return Status::Ok();
}

StatusOr<size_t> MemorySource::Read(void* buf, size_t n) {
  n = std::min(n, bytes_.size() - pos_);
  if (n) std::memcpy(buf, bytes_.data() + pos_, n);
  pos_ += n;
  return n;
}

}  // namespace gandiva::checkpoint
