// A gang's checkpoint and restore, rank by rank; see gang_transfer.h.
#include "jobs/gang_transfer.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "gandiva/common/clock.h"
#include "gandiva/common/unique_fd.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/environment.h"
#include "gandiva/sealed/sealed_channel.h"
#include "jobs/as_user.h"

namespace gandiva::controller {

namespace fs = std::filesystem;
using runtime::ControlBlock;

namespace {

constexpr uint64_t kRankTransferTimeoutNs = 600 * kSec;
constexpr time_t kSocketTimeoutS = 60;

// Asks every rank to move its state to/from targets[k], then waits for all.
Status RunOnRanks(uint32_t kind, const std::vector<std::string>& targets,
                  const std::vector<ControlBlock*>& ranks, const std::atomic<bool>& stopping,
                  uint64_t* bytes) {
  for (size_t k = 0; k < ranks.size(); ++k)
    if (!runtime::RequestTransfer(ranks[k], static_cast<runtime::Request>(kind),
                                  targets[k].c_str()))
      return InvalidArgument("rank target too long: " + targets[k]);
  const uint64_t deadline = MonotonicNowNs() + kRankTransferTimeoutNs;
  Status result = Status::Ok();
  for (size_t k = 0; k < ranks.size(); ++k) {
    const uint64_t now = MonotonicNowNs();
    const runtime::TransferState s = runtime::WaitForTransfer(
        ranks[k], deadline > now ? deadline - now : 0, [&stopping] { return stopping.load(); });
    *bytes += ranks[k]->transfer_bytes.load();
    if (s == runtime::kTransferFailed && result.ok())
      result = Internal("rank " + std::to_string(k) + ": " + runtime::TransferError(ranks[k]));
    else if (s != runtime::kTransferDone && result.ok())
      result = DeadlineExceeded("rank " + std::to_string(k) + " did not finish its transfer");
  }
  return result;
}

StatusOr<UniqueFd> Connect(const std::string& path) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Internal("socket: " + std::string(std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return InvalidArgument("socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return Unavailable("cannot connect to " + path + ": " + std::strerror(errno));
  // A migrator that stalls mid-stream must not keep the gang's transfer (and a
  // stopping node) waiting for ever.
  const timeval timeout{kSocketTimeoutS, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  return fd;
}

// The manifest is one short line; anything longer is not one.
constexpr size_t kManifestMax = 64;
// Copies go through a buffer of this size: a part of any length is never
// held in memory whole.
constexpr size_t kCopyBuffer = 1 << 20;

StatusOr<std::string> ReadManifest(int64_t owner_uid, const std::string& path) {
  GD_ASSIGN_OR_RETURN(UniqueFd fd, OpenAsUser(owner_uid, path, O_RDONLY | O_NOFOLLOW));
  char buf[kManifestMax];
  const ssize_t n = read(fd.get(), buf, sizeof(buf));
  if (n < 0) return Internal("cannot read " + path + ": " + std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Internal("cannot write " + path + ": " + std::strerror(errno));
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Written as the job's user (as_user.h): DIR is the user's choice, and a link
// planted in it must not have root write through it.
Status WriteManifest(int64_t owner_uid, const std::string& path, const std::string& text) {
  GD_ASSIGN_OR_RETURN(UniqueFd fd,
                      OpenAsUser(owner_uid, path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600));
  return WriteAll(fd.get(), text.data(), text.size(), path);
}

std::string RankDir(const std::string& dir, size_t k) {
  return dir + "/" + checkpoint::kRankDirPrefix + std::to_string(k);
}

// "file:DIR/state.gdck": a checkpoint directory with one part per rank. DIR
// and what gandivad makes in it (the rank folders, the manifest) are made as
// the job's user; each rank writes its own part.
Status FileTransfer(uint32_t kind, const std::string& path, const std::vector<ControlBlock*>& ranks,
                    int64_t owner_uid, const std::atomic<bool>& stopping, uint64_t* bytes) {
  const std::string dir = fs::path(path).parent_path().string();
  const std::string manifest = dir + "/" + checkpoint::kGangManifestName;
  const std::string expected = "ranks " + std::to_string(ranks.size()) + "\n";
  if (kind == runtime::kRequestRestore) {
    auto text = ReadManifest(owner_uid, manifest);
    if (!text.ok() || *text != expected)
      return FailedPrecondition(dir + " is not a checkpoint of a " + std::to_string(ranks.size()) +
                                "-rank gang" +
                                (text.ok() ? "" : " (" + text.status().message() + ")"));
  }
  std::vector<std::string> targets;
  for (size_t k = 0; k < ranks.size(); ++k) {
    GD_RETURN_IF_ERROR(MakeDirsAsUser(owner_uid, RankDir(dir, k)));
    targets.push_back("file:" + RankDir(dir, k) + "/" + checkpoint::kCheckpointFileName);
  }
  GD_RETURN_IF_ERROR(RunOnRanks(kind, targets, ranks, stopping, bytes));
  if (kind == runtime::kRequestCheckpoint) return WriteManifest(owner_uid, manifest, expected);
  return Status::Ok();
}

std::vector<std::string> PartFiles(const std::string& socket, size_t n) {
  std::vector<std::string> parts;
  for (size_t k = 0; k < n; ++k) parts.push_back(socket + ".rank-" + std::to_string(k) + ".gdck");
  return parts;
}

// The migration's bulk connection, which the node's migrator hands over on
// `socket` as it would to a single job.
StatusOr<sealed::Handoff> TakeHandoff(const std::string& socket) {
  GD_ASSIGN_OR_RETURN(UniqueFd control, Connect(socket));
  return sealed::ReceiveHandoff(control.get(), kSocketTimeoutS * 1000);
}

Status SendContainer(const std::string& socket, const std::vector<std::string>& parts,
                     int64_t owner_uid) {
  GD_ASSIGN_OR_RETURN(sealed::Handoff h, TakeHandoff(socket));
  sealed::SealedWriter out(std::move(h.connection), h.key, h.next_seq, kSocketTimeoutS * 1000);
  out.ApplyTestFlags(h.flags);
  const uint32_t n = static_cast<uint32_t>(parts.size());
  GD_RETURN_IF_ERROR(out.Write(kGangStreamMagic, sizeof(kGangStreamMagic)));
  GD_RETURN_IF_ERROR(out.Write(&n, sizeof(n)));
  std::vector<char> buf(kCopyBuffer);
  for (const std::string& part : parts) {
    // Written by the rank: opened as its user, never through a link.
    GD_ASSIGN_OR_RETURN(UniqueFd fd, OpenAsUser(owner_uid, part, O_RDONLY | O_NOFOLLOW));
    struct stat st;
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
      return FailedPrecondition(part + " is not a rank's state file");
    const uint64_t len = static_cast<uint64_t>(st.st_size);
    GD_RETURN_IF_ERROR(out.Write(&len, sizeof(len)));
    for (uint64_t left = len; left > 0;) {
      const ssize_t r = read(fd.get(), buf.data(), std::min<uint64_t>(left, buf.size()));
      if (r <= 0) return DataLoss(part + " changed while it was sent");
      GD_RETURN_IF_ERROR(out.Write(buf.data(), static_cast<size_t>(r)));
      left -= static_cast<uint64_t>(r);
    }
  }
  return out.Finish();
}

// Reads exactly n bytes of the container (the stream ending first is DataLoss).
Status ReadExactly(sealed::SealedReader& in, void* out, size_t n) {
  char* at = static_cast<char*>(out);
  while (n > 0) {
    GD_ASSIGN_OR_RETURN(size_t r, in.Read(at, n, kSocketTimeoutS * 1000));
    if (r == 0) return DataLoss("the gang's state is cut short");
    at += r;
    n -= r;
  }
  return Status::Ok();
}

// Each part goes straight to its file as it arrives: memory stays one buffer
// whatever the state's size. A part file is made new (O_EXCL, never through a
// link) as the job's user.
Status ReceiveContainer(const std::string& socket, const std::vector<std::string>& parts,
                        int64_t owner_uid) {
  GD_ASSIGN_OR_RETURN(sealed::Handoff h, TakeHandoff(socket));
  sealed::SealedReader in(std::move(h.connection), h.key, h.next_seq);
  char magic[sizeof(kGangStreamMagic)];
  uint32_t n = 0;
  if (!ReadExactly(in, magic, sizeof(magic)).ok() ||
      std::memcmp(magic, kGangStreamMagic, sizeof(magic)) != 0)
    return DataLoss("the state is not a gang's (no GDGANG01 header)");
  GD_RETURN_IF_ERROR(ReadExactly(in, &n, sizeof(n)));
  if (n != parts.size())
    return FailedPrecondition("the state is of a " + std::to_string(n) +
                              "-rank gang; this gang has " + std::to_string(parts.size()) +
                              " ranks");
  std::vector<char> buf(kCopyBuffer);
  for (const std::string& part : parts) {
    uint64_t len = 0;
    GD_RETURN_IF_ERROR(ReadExactly(in, &len, sizeof(len)));
    unlink(part.c_str());  // a failed attempt's (the name is the migration's own)
    GD_ASSIGN_OR_RETURN(
        UniqueFd fd, OpenAsUser(owner_uid, part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600));
    for (uint64_t left = len; left > 0;) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      GD_RETURN_IF_ERROR(ReadExactly(in, buf.data(), chunk));
      GD_RETURN_IF_ERROR(WriteAll(fd.get(), buf.data(), chunk, part));
      left -= chunk;
    }
  }
  char extra;
  GD_ASSIGN_OR_RETURN(size_t trailing, in.Read(&extra, 1, kSocketTimeoutS * 1000));
  if (trailing != 0) return DataLoss("the gang's state has bytes after its last part");
  return Status::Ok();
}

// "sealed:SOCKET": one container on the bulk connection handed over on the
// socket, each rank's part in a file beside it.
Status SealedTransfer(uint32_t kind, const std::string& socket,
                      const std::vector<ControlBlock*>& ranks, int64_t owner_uid,
                      const std::atomic<bool>& stopping, uint64_t* bytes) {
  const std::vector<std::string> parts = PartFiles(socket, ranks.size());
  std::vector<std::string> targets;
  for (const std::string& p : parts) targets.push_back("file:" + p);
  Status s = Status::Ok();
  if (kind == runtime::kRequestCheckpoint) {
    s = RunOnRanks(kind, targets, ranks, stopping, bytes);
    if (s.ok()) s = SendContainer(socket, parts, owner_uid);
  } else {
    s = ReceiveContainer(socket, parts, owner_uid);
    if (s.ok()) s = RunOnRanks(kind, targets, ranks, stopping, bytes);
  }
  for (const std::string& p : parts) unlink(p.c_str());
  return s;
}

}  // namespace

Status GangTransfer(uint32_t kind, const std::string& target,
                    const std::vector<ControlBlock*>& ranks, int64_t owner_uid,
                    const std::atomic<bool>& stopping, uint64_t* bytes) {
  *bytes = 0;
  if (target.rfind("file:", 0) == 0)
    return FileTransfer(kind, target.substr(5), ranks, owner_uid, stopping, bytes);
  if (target.rfind("sealed:", 0) == 0)
    return SealedTransfer(kind, target.substr(7), ranks, owner_uid, stopping, bytes);
  return InvalidArgument("gang transfer target must be file:PATH or sealed:PATH, got '" + target +
                         "'");
}

}  // namespace gandiva::controller
