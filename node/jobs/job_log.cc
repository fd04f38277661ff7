// Capped job logs; see job_log.h.
#include "jobs/job_log.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "gandiva/common/log.h"
#include "gandiva/common/private_files.h"
#include "gandiva/common/unique_fd.h"

namespace gandiva::controller {

namespace {

constexpr auto kCapPeriod = std::chrono::milliseconds(250);

// A link in place of a log is not followed: it counts as empty.
uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size)
                                                              : 0;
}

Status Errno(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

// Copies `from`, from byte `start` up to the size it has when the copy catches
// up with it, into a new file `to`; the bytes copied.
// `to` is made afresh (a leftover removed first), never written through a link.
StatusOr<uint64_t> CopyTail(int from, off_t start, const std::string& to) {
  unlink(to.c_str());
  GD_ASSIGN_OR_RETURN(UniqueFd out, CreateFileNoFollow(to, O_WRONLY, 0600));
  off_t at = start;
  for (;;) {
    const ssize_t n = sendfile(out.get(), from, &at, 1 << 20);
    if (n < 0) return Errno("cannot copy into " + to);
    if (n == 0) return static_cast<uint64_t>(at - start);
  }
}

// Length of the UTF-8 sequence starting at s[0] if it is valid and complete;
// 0 if it is invalid; -1 if it is a valid prefix cut off by the end of s.
int SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4)) return 0;
  for (int i = 1; i < len; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return -1;
    if ((b(i) & 0xC0) != 0x80) return 0;
    if (i == 1 && ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F) ||
                   (c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) > 0x8F)))
      return 0;  // overlong, a surrogate, or past U+10FFFF
  }
  return len;
}

}  // namespace

std::string ToValidUtf8(std::string_view bytes, bool hold_tail, size_t* used) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const int len = SequenceLength(bytes.substr(i));
    if (len > 0) {
      out.append(bytes.substr(i, static_cast<size_t>(len)));
      i += static_cast<size_t>(len);
    } else if (len < 0 && hold_tail) {
      break;  // the rest may arrive later
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  *used = i;
  return out;
}

Status CappedLog::Cap() {
  const uint64_t size = FileSize(path_);
  if (cap_ == 0 || size <= cap_) return Status::Ok();
  GD_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularNoFollow(path_, O_RDWR));
  const std::string tmp = path_ + ".1.tmp";
  const uint64_t start = size - cap_;  // the newest cap bytes move to FILE.1
  GD_ASSIGN_OR_RETURN(uint64_t copied, CopyTail(fd.get(), static_cast<off_t>(start), tmp));
  struct stat st {};
  fstat(fd.get(), &st);
  if (ftruncate(fd.get(), 0) != 0) return Errno("cannot truncate " + path_);
  if (rename(tmp.c_str(), (path_ + ".1").c_str()) != 0) return Errno("cannot rename " + tmp);
  old_first_ = base_ + start;
  old_size_ = copied;
  base_ += std::max<uint64_t>(static_cast<uint64_t>(st.st_size), start + copied);
  return Status::Ok();
}

StatusOr<LogRead> CappedLog::Read(uint64_t offset, size_t max_bytes) const {
  // Two segments: FILE.1 at [old_first_, old_first_ + old_size_), FILE from base_;
  // bytes between them (written during a rotation) are gone.
  struct Segment {
    std::string path;
    uint64_t first, end;
  };
  const Segment segments[] = {{path_ + ".1", old_first_, old_first_ + old_size_},
                              {path_, base_, base_ + FileSize(path_)}};
  LogRead r;
  r.end_offset = segments[1].end;
  r.offset = std::min(std::max(offset, old_size_ ? old_first_ : base_), r.end_offset);
  if (r.offset >= segments[0].end && r.offset < base_) r.offset = base_;
  std::string raw(std::min<uint64_t>(max_bytes, r.end_offset - r.offset), '\0');
  size_t got = 0;
  for (const Segment& seg : segments) {
    const uint64_t at = r.offset + got;
    if (got == raw.size() || at < seg.first || at >= seg.end) continue;
    GD_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularNoFollow(seg.path, O_RDONLY));
    const size_t want = std::min<uint64_t>(raw.size() - got, seg.end - at);
    const ssize_t n = pread(fd.get(), raw.data() + got, want, static_cast<off_t>(at - seg.first));
    if (n < 0) return Errno("cannot read " + seg.path);
    got += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < want) break;
    if (&seg == &segments[0] && seg.end < base_) break;  // a gap: the rest on the next read
  }
  raw.resize(got);
  size_t used = 0;
  r.data = ToValidUtf8(raw, /*hold_tail=*/r.offset + got < r.end_offset, &used);
  r.next_offset = r.offset + used;
  return r;
}

void JobLogs::Add(uint64_t job, const std::string& stdout_path, const std::string& stderr_path) {
  std::lock_guard lock(mu_);
  logs_.emplace(job, Pair{CappedLog(stdout_path, cap_), CappedLog(stderr_path, cap_)});
}

StatusOr<LogRead> JobLogs::Read(uint64_t job, bool stderr_stream, uint64_t offset,
                                size_t max_bytes) {
  std::lock_guard lock(mu_);
  auto it = logs_.find(job);
  if (it == logs_.end())
    return NotFound("job " + std::to_string(job) +
                    " has no log here: only jobs gandivad started (launch) have one");
  CappedLog& log = stderr_stream ? it->second.err : it->second.out;
  if (Status s = log.Cap(); !s.ok()) GD_LOG(kWarn, "%s", s.message().c_str());
  return log.Read(offset, std::min(max_bytes, kMaxLogReadBytes));
}

void JobLogs::CapAll() {
  std::lock_guard lock(mu_);
  for (auto& [job, pair] : logs_)
    for (CappedLog* log : {&pair.out, &pair.err})
      if (Status s = log->Cap(); !s.ok()) GD_LOG(kWarn, "%s", s.message().c_str());
}

void JobLogs::Start() {
  keeper_ = std::thread([this] {
    std::unique_lock lock(stop_mu_);
    while (!stop_cv_.wait_for(lock, kCapPeriod, [this] { return stopping_; })) {
      lock.unlock();
      CapAll();
      lock.lock();
    }
  });
}

void JobLogs::Stop() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
}

}  // namespace gandiva::controller
