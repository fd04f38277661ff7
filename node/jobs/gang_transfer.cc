// A gang's checkpoint and restore, rank by rank; see gang_transfer.h.
#include "jobs/gang_transfer.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gandiva/common/clock.h"
#include "gandiva/common/unique_fd.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/environment.h"
#include "gandiva/sealed/sealed_channel.h"

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
      result = Internal("rank " + std::to_string(k) + ": " + ranks[k]->transfer_error);
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

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Status WriteFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  return out ? Status::Ok() : Internal("cannot write " + path);
}

std::string RankDir(const std::string& dir, size_t k) {
  return dir + "/" + checkpoint::kRankDirPrefix + std::to_string(k);
}

// "file:DIR/state.gdck": a checkpoint directory with one part per rank.
Status FileTransfer(uint32_t kind, const std::string& path, const std::vector<ControlBlock*>& ranks,
                    const std::atomic<bool>& stopping, uint64_t* bytes) {
  const std::string dir = fs::path(path).parent_path().string();
  const std::string manifest = dir + "/" + checkpoint::kGangManifestName;
  if (kind == runtime::kRequestRestore) {
    auto text = ReadFile(manifest);
    if (!text.ok() || *text != "ranks " + std::to_string(ranks.size()) + "\n")
      return FailedPrecondition(dir + " is not a checkpoint of a " + std::to_string(ranks.size()) +
                                "-rank gang");
  }
  std::vector<std::string> targets;
  for (size_t k = 0; k < ranks.size(); ++k) {
    std::error_code ec;
    fs::create_directories(RankDir(dir, k), ec);
    if (ec) return Internal("cannot create " + RankDir(dir, k) + ": " + ec.message());
    targets.push_back("file:" + RankDir(dir, k) + "/" + checkpoint::kCheckpointFileName);
  }
  GD_RETURN_IF_ERROR(RunOnRanks(kind, targets, ranks, stopping, bytes));
  if (kind == runtime::kRequestCheckpoint)
    return WriteFile(manifest, "ranks " + std::to_string(ranks.size()) + "\n");
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

Status SendContainer(const std::string& socket, const std::vector<std::string>& parts) {
  GD_ASSIGN_OR_RETURN(sealed::Handoff h, TakeHandoff(socket));
  sealed::SealedWriter out(std::move(h.connection), h.key, h.next_seq, kSocketTimeoutS * 1000);
  out.ApplyTestFlags(h.flags);
  const uint32_t n = static_cast<uint32_t>(parts.size());
  GD_RETURN_IF_ERROR(out.Write(kGangStreamMagic, sizeof(kGangStreamMagic)));
  GD_RETURN_IF_ERROR(out.Write(&n, sizeof(n)));
  for (const std::string& part : parts) {
    GD_ASSIGN_OR_RETURN(std::string data, ReadFile(part));
    const uint64_t len = data.size();
    GD_RETURN_IF_ERROR(out.Write(&len, sizeof(len)));
    GD_RETURN_IF_ERROR(out.Write(data.data(), data.size()));
  }
  return out.Finish();
}

Status ReceiveContainer(const std::string& socket, const std::vector<std::string>& parts) {
  GD_ASSIGN_OR_RETURN(sealed::Handoff h, TakeHandoff(socket));
  sealed::SealedReader in(std::move(h.connection), h.key, h.next_seq);
  std::string all;
  char buf[1 << 16];
  for (;;) {
    GD_ASSIGN_OR_RETURN(size_t r, in.Read(buf, sizeof(buf), kSocketTimeoutS * 1000));
    if (r == 0) break;
    all.append(buf, r);
  }
  uint32_t n = 0;
  if (all.size() < sizeof(kGangStreamMagic) + sizeof(n) ||
      std::memcmp(all.data(), kGangStreamMagic, sizeof(kGangStreamMagic)) != 0)
    return DataLoss("the state is not a gang's (no GDGANG01 header)");
  std::memcpy(&n, all.data() + sizeof(kGangStreamMagic), sizeof(n));
  if (n != parts.size())
    return FailedPrecondition("the state is of a " + std::to_string(n) +
                              "-rank gang; this gang has " + std::to_string(parts.size()) +
                              " ranks");
  size_t at = sizeof(kGangStreamMagic) + sizeof(n);
  for (const std::string& part : parts) {
    uint64_t len = 0;
    if (all.size() - at < sizeof(len)) return DataLoss("the gang's state is cut short");
    std::memcpy(&len, all.data() + at, sizeof(len));
    at += sizeof(len);
    if (all.size() - at < len) return DataLoss("the gang's state is cut short");
    GD_RETURN_IF_ERROR(WriteFile(part, std::string_view(all).substr(at, len)));
    at += len;
  }
  return Status::Ok();
}

// "sealed:SOCKET": one container on the bulk connection handed over on the
// socket, each rank's part in a file beside it.
Status SealedTransfer(uint32_t kind, const std::string& socket,
                      const std::vector<ControlBlock*>& ranks, const std::atomic<bool>& stopping,
                      uint64_t* bytes) {
  const std::vector<std::string> parts = PartFiles(socket, ranks.size());
  std::vector<std::string> targets;
  for (const std::string& p : parts) targets.push_back("file:" + p);
  Status s = Status::Ok();
  if (kind == runtime::kRequestCheckpoint) {
    s = RunOnRanks(kind, targets, ranks, stopping, bytes);
    if (s.ok()) s = SendContainer(socket, parts);
  } else {
    s = ReceiveContainer(socket, parts);
    if (s.ok()) s = RunOnRanks(kind, targets, ranks, stopping, bytes);
  }
  for (const std::string& p : parts) unlink(p.c_str());
  return s;
}

}  // namespace

Status GangTransfer(uint32_t kind, const std::string& target,
                    const std::vector<ControlBlock*>& ranks, const std::atomic<bool>& stopping,
                    uint64_t* bytes) {
  *bytes = 0;
  if (target.rfind("file:", 0) == 0)
    return FileTransfer(kind, target.substr(5), ranks, stopping, bytes);
  if (target.rfind("sealed:", 0) == 0)
    return SealedTransfer(kind, target.substr(7), ranks, stopping, bytes);
  return InvalidArgument("gang transfer target must be file:PATH or sealed:PATH, got '" + target +
                         "'");
}

}  // namespace gandiva::controller
