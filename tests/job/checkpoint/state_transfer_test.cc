// SaveState / RestoreState and the C API on real targets: files (atomic
// replace, directories created) and Unix sockets (a test thread plays the
// node controller's listener), including a peer that hangs up mid-stream.
#include "gandiva/checkpoint/state_transfer.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "fresh_state.h"
#include "gandiva/checkpoint/registry.h"
#include "gandiva/contract/control_block.h"
#include "gandiva/gandiva.hpp"
#include "stream.h"

namespace gandiva::checkpoint {
namespace {

namespace fs = std::filesystem;

// The job id SaveState records in the stream's header.
constexpr uint64_t kJobId = 7;

// One listening Unix socket; Accept() serves one connection.
class Listener {
 public:
  explicit Listener(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    ::unlink(path.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
  }
  ~Listener() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  // The registered state saved to this listener (as a job saves it for its
  // node controller), all it received in *out.
  Status Save(std::vector<uint8_t>* out, uint64_t* bytes) {
    std::thread rx = Receive(out);
    Status s = SaveState(target(), kJobId, bytes);
    rx.join();
    return s;
  }
  // Reads everything the job sends until it closes.
  std::thread Receive(std::vector<uint8_t>* out) {
    return std::thread([this, out] {
      int c = ::accept(fd_, nullptr, nullptr);
      std::vector<uint8_t> buf(1 << 20);
      ssize_t n;
      while ((n = ::read(c, buf.data(), buf.size())) > 0)
        out->insert(out->end(), buf.begin(), buf.begin() + n);
      ::close(c);
    });
  }
  // Sends bytes to the job, then closes.
  std::thread Send(const std::vector<uint8_t>* bytes) {
    return std::thread([this, bytes] {
      int c = ::accept(fd_, nullptr, nullptr);
      size_t off = 0;
      while (off < bytes->size()) {
        ssize_t n = ::send(c, bytes->data() + off, bytes->size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      ::close(c);
    });
  }
  // Accepts and hangs up at once.
  std::thread HangUp() {
    return std::thread([this] { ::close(::accept(fd_, nullptr, nullptr)); });
  }
  std::string target() const { return "unix:" + path_; }

 private:
  std::string path_;
  int fd_;
};

struct Blob {
  std::vector<uint8_t> data;
  std::vector<uint8_t> loaded;
  int loads = 0;
  bool fail_save = false;
};

int SaveBlob(void* user, gd_writer* w) {
  auto* b = static_cast<Blob*>(user);
  if (b->fail_save) return 3;
  return gd_write(w, b->data.data(), b->data.size());
}

int LoadBlob(void* user, gd_reader* r) {
  auto* b = static_cast<Blob*>(user);
  ++b->loads;
  b->loaded.resize(static_cast<size_t>(gd_section_size(r)));
  long long got = gd_read(r, b->loaded.data(), b->loaded.size());
  return got == static_cast<long long>(b->loaded.size()) && gd_read(r, b->loaded.data(), 1) == 0
             ? 0
             : 1;
}

class StateTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gd_ckpt_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (const auto& name : StateRegistry::Global().Names()) (void)UnregisterState(name);
    fs::remove_all(dir_);
  }
  void Add(const char* name, size_t size, uint8_t seed) {
    auto b = std::make_unique<Blob>();
    b->data.resize(size);
    for (size_t i = 0; i < size; ++i) b->data[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 12));
    ASSERT_EQ(gd_register_state(name, &SaveBlob, &LoadBlob, b.get()), 0);
    blobs_.push_back(std::move(b));
  }
  int Loads() const {
    int n = 0;
    for (const auto& b : blobs_) n += b->loads;
    return n;
  }
  fs::path dir_;
  std::vector<std::unique_ptr<Blob>> blobs_;
};

mode_t ModeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A checkpoint is its user's alone: 0600 in directories made 0700, never
// into a directory others may write (they could swap it before the restore),
// never through a link at its temporary name; and a restore loads only a
// file no one else could have written.
TEST_F(StateTransferTest, AFileCheckpointIsItsUsersAlone) {
  Add("model", 4096, 1);
  const fs::path made = dir_ / "made" / "run1";
  ASSERT_EQ(gd_checkpoint(made.c_str()), 0);
  EXPECT_EQ(ModeOf(made / kCheckpointFileName), 0600u);
  EXPECT_EQ(ModeOf(made), 0700u);
  EXPECT_EQ(ModeOf(dir_ / "made"), 0700u);

  const fs::path shared = dir_ / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all | fs::perms::sticky_bit);
  uint64_t saved = 0;
  const Status refused = SaveState("file:" + (shared / kCheckpointFileName).string(), 0, &saved);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied) << refused.ToString();
  EXPECT_NE(refused.message().find("will not write a checkpoint there"), std::string::npos)
      << refused.message();
  EXPECT_TRUE(fs::is_empty(shared));

  const fs::path victim = dir_ / "victim";
  std::ofstream(victim) << "precious";
  const fs::path mine = dir_ / "mine";
  fs::create_directories(mine);
  fs::create_symlink(victim, mine / ("." + std::string(kCheckpointFileName) + ".tmp." +
                                     std::to_string(::getpid())));
  ASSERT_EQ(gd_checkpoint(mine.c_str()), 0);
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");

  uint64_t bytes = 0;
  fs::permissions(made / kCheckpointFileName, fs::perms::others_write, fs::perm_options::add);
  const Status writable = RestoreState("file:" + (made / kCheckpointFileName).string(), &bytes);
  EXPECT_EQ(writable.code(), StatusCode::kPermissionDenied) << writable.ToString();
  EXPECT_NE(writable.message().find("will not restore"), std::string::npos) << writable.message();
  fs::permissions(made / kCheckpointFileName, fs::perms::others_write, fs::perm_options::remove);
  EXPECT_TRUE(RestoreState("file:" + (made / kCheckpointFileName).string(), &bytes).ok());
}

TEST_F(StateTransferTest, RegistryRejectsDuplicatesAndUnknownNames) {
  Add("a", 10, 1);
  Blob other;
  EXPECT_EQ(gd_register_state("a", &SaveBlob, &LoadBlob, &other), -1);
  EXPECT_EQ(gd_register_state(nullptr, &SaveBlob, &LoadBlob, &other), -1);
  EXPECT_EQ(gd_unregister_state("nope"), -1);
  EXPECT_EQ(gd_unregister_state("a"), 0);
  EXPECT_TRUE(StateRegistry::Global().Names().empty());
}

TEST_F(StateTransferTest, FileRoundTripCreatesTheDirectoryAndLeavesNoTemporary) {
  Add("model", (5 << 20) + 17, 1);
  Add("counter", 8, 2);
  const fs::path ckpt_dir = dir_ / "nested" / "run1";
  ASSERT_EQ(gd_checkpoint(ckpt_dir.c_str()), 0);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ckpt_dir)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{kCheckpointFileName});

  uint64_t bytes = 0;
  Status s = RestoreState("file:" + (ckpt_dir / kCheckpointFileName).string(), &bytes);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(bytes, fs::file_size(ckpt_dir / kCheckpointFileName));
  for (const auto& b : blobs_) EXPECT_EQ(b->loaded, b->data);
}

// A job out of threads (a cgroup's pids.max, as containers set it) still
// restores: the helper threads (the chunk checker, the unmapper) are only
// speed, and std::thread's exception must not end the job mid-restore. The
// restore runs in a child that a pids cgroup (v1, as this machine has it)
// holds to its one task; skipped where no such cgroup can be made.
TEST_F(StateTransferTest, ARestoreWithoutThreadsToSpareStillLoads) {
  const fs::path pids_root = "/sys/fs/cgroup/pids";
  const fs::path group = pids_root / ("gd_ckpt_test_" + std::to_string(::getpid()));
  std::error_code ec;
  if (::geteuid() != 0 || !fs::create_directory(group, ec))
    GTEST_SKIP() << "no pids cgroup to confine a child to (root and cgroup v1 pids needed)";
  Add("model", (80 << 20) + 5, 3);  // past 64 MiB: the unmapping goes to a thread too
  ASSERT_EQ(gd_checkpoint(dir_.c_str()), 0);
  const std::string file = "file:" + (dir_ / kCheckpointFileName).string();
  for (auto& b : blobs_) b->loaded.clear();

  const pid_t child = ::fork();
  if (child == 0) {
    // One task allowed: this one. Every std::thread after this fails.
    std::ofstream(group / "pids.max") << "1";
    std::ofstream(group / "cgroup.procs") << ::getpid();
    bool confined = false;
    try {
      std::thread([] {}).join();
    } catch (const std::exception&) {
      confined = true;
    }
    if (!confined) ::_exit(3);
    try {
      uint64_t bytes = 0;
      const Status s = RestoreState(file, &bytes, RestoreCheck::kWhileLoading);
      ::_exit(!s.ok() ? 1 : blobs_[0]->loaded == blobs_[0]->data ? 0 : 2);
    } catch (...) {
      ::_exit(4);  // what a job would have died of (never back into gtest in a child)
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  fs::remove(group, ec);
  ASSERT_TRUE(WIFEXITED(status)) << "the restore ended the child: signal " << WTERMSIG(status);
  EXPECT_NE(WEXITSTATUS(status), 3) << "the cgroup did not hold the child to one task";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: the restore failed; 2: wrong bytes loaded; 4: an exception left the library";
}

TEST_F(StateTransferTest, FailedSaveKeepsThePreviousCheckpoint) {
  Add("model", 1 << 20, 1);
  ASSERT_EQ(gd_checkpoint(dir_.c_str()), 0);
  const auto before = fs::file_size(dir_ / kCheckpointFileName);
  blobs_[0]->data.resize(2 << 20);
  blobs_[0]->fail_save = true;
  uint64_t bytes = 0;
  Status s = SaveState("file:" + (dir_ / kCheckpointFileName).string(), kJobId, &bytes);
  EXPECT_NE(s.message().find("saving section 'model': save function returned 3"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(fs::file_size(dir_ / kCheckpointFileName), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
  blobs_[0]->data.resize(1 << 20);
  ASSERT_TRUE(RestoreState("file:" + (dir_ / kCheckpointFileName).string(), &bytes).ok());
}

TEST_F(StateTransferTest, NothingRegisteredIsRefusedSayingWhatToRegister) {
  const std::string file = (dir_ / kCheckpointFileName).string();
  uint64_t bytes = 1;
  Status s = SaveState("file:" + file, kJobId, &bytes);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("job 7 registered no state: call gandiva.torch.register(model, "
                             "optimizer, ...) or gandiva.register_state() / gd_register_state()"),
            std::string::npos)
      << s.ToString();
  EXPECT_LT(s.ToString().size(), runtime::kTransferErrorSize) << "fits the control block";
  EXPECT_EQ(bytes, 0u);
  EXPECT_FALSE(fs::exists(file)) << "nothing written";
  EXPECT_EQ(gd_checkpoint(dir_.c_str()), -1);  // the job's own call, unmanaged
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(StateTransferTest, HeaderRecordsTheCallersJobId) {
  Add("counter", 8, 2);
  const std::string target = "file:" + (dir_ / kCheckpointFileName).string();
  uint64_t bytes = 0;
  ASSERT_TRUE(SaveState(target, kJobId, &bytes).ok());
  auto source = OpenSource(target);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto stream = ReadStream(source->get());
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  std::string job_id;
  for (const auto& [key, value] : stream->metadata)
    if (key == "job_id") job_id = value;
  EXPECT_EQ(job_id, std::to_string(kJobId));
}

TEST_F(StateTransferTest, MissingFileIsNotFound) {
  uint64_t bytes = 0;
  Status s = RestoreState("file:" + (dir_ / "none" / kCheckpointFileName).string(), &bytes);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_EQ(RestoreState("ftp:x", &bytes).code(), StatusCode::kInvalidArgument);
}

TEST_F(StateTransferTest, CorruptFileLoadsNothing) {
  Add("model", 3 << 20, 1);
  Add("counter", 8, 2);
  ASSERT_EQ(gd_checkpoint(dir_.c_str()), 0);
  const fs::path file = dir_ / kCheckpointFileName;
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) - 200));  // inside the last chunk
    f.put('\x5a');
  }
  uint64_t bytes = 0;
  Status s = RestoreState("file:" + file.string(), &bytes);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("corrupt chunk"), std::string::npos) << s.ToString();
  EXPECT_EQ(Loads(), 0);
}

TEST_F(StateTransferTest, SocketRoundTripWithATestListener) {
  Add("model", (9 << 20) + 5, 1);
  Add("optimizer", 1234, 2);
  Listener listener((dir_ / "ctl.sock").string());
  std::vector<uint8_t> stream;
  std::thread rx = listener.Receive(&stream);
  uint64_t sent = 0;
  Status s = SaveState(listener.target(), kJobId, &sent);
  rx.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sent, stream.size());

  std::thread tx = listener.Send(&stream);
  uint64_t received = 0;
  s = RestoreState(listener.target(), &received);
  tx.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(received, stream.size());
  for (const auto& b : blobs_) EXPECT_EQ(b->loaded, b->data);
}

TEST_F(StateTransferTest, AReserveIsSizedByTheRegisteredStateAndUsedByTheNextSocketRestore) {
  Add("model", (25 << 20) + 5, 1);  // more than the kept memory's first size: it grows
  Add("optimizer", 1234, 2);
  uint64_t measured = 0;
  ASSERT_TRUE(ReserveForRestore(&measured).ok());
  for (const auto& b : blobs_) EXPECT_EQ(b->loads, 0) << "measuring runs saves, never loads";

  Listener listener((dir_ / "ctl.sock").string());
  std::vector<uint8_t> stream;
  uint64_t sent = 0;
  ASSERT_TRUE(listener.Save(&stream, &sent).ok());
  EXPECT_EQ(measured, sent) << "the counter sees the stream a save writes";

  std::thread tx = listener.Send(&stream);
  uint64_t received = 0;
  Status s = RestoreState(listener.target(), &received);
  tx.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const auto& b : blobs_) EXPECT_EQ(b->loaded, b->data);
  EXPECT_EQ(TakeFreshState(), nullptr) << "the restore took the reserve";
}

// gd_register_buffer: the runtime saves the bytes and restores into them.
TEST_F(StateTransferTest, ABufferSectionRoundTripsThroughAFileAndASocket) {
  std::vector<uint8_t> weights((9u << 20) + 5);
  const auto fill = [&](uint8_t seed) {
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<uint8_t>(i * 7 + seed);
  };
  ASSERT_EQ(gd_register_buffer("weights", weights.data(), weights.size()), 0);
  Add("counter", 8, 3);
  EXPECT_EQ(gd_register_buffer("weights", weights.data(), weights.size()), -1) << "taken";
  EXPECT_EQ(gd_register_buffer("none", nullptr, 10), -1);
  EXPECT_EQ(gd_register_buffer("empty", weights.data(), 0), -1);

  // A file: saved from the buffer, restored into it.
  fill(1);
  const std::vector<uint8_t> saved = weights;
  ASSERT_EQ(gd_checkpoint(dir_.c_str()), 0);
  fill(2);
  uint64_t bytes = 0;
  Status s = RestoreState("file:" + (dir_ / kCheckpointFileName).string(), &bytes);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(weights, saved);

  // A warm copy: its own state (fill 3) reserved, the stream (fill 4) lands
  // in the buffer itself.
  Listener listener((dir_ / "ctl.sock").string());
  std::vector<uint8_t> stream;
  fill(4);
  const std::vector<uint8_t> sent_state = weights;
  std::thread rx = listener.Receive(&stream);
  ASSERT_TRUE(SaveState(listener.target(), kJobId, &bytes).ok());
  rx.join();
  fill(3);
  ASSERT_TRUE(ReserveForRestore(&bytes).ok());
  std::thread tx = listener.Send(&stream);
  s = RestoreState(listener.target(), &bytes, RestoreCheck::kWhileLoading);
  tx.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(weights, sent_state);
  EXPECT_EQ(blobs_[0]->loaded, blobs_[0]->data);
}

TEST_F(StateTransferTest, ABufferOfAnotherSizeLoadsNothingAndSaysBothSizes) {
  std::vector<uint8_t> weights(1000, 1);
  ASSERT_EQ(gd_register_buffer("weights", weights.data(), weights.size()), 0);
  ASSERT_EQ(gd_checkpoint(dir_.c_str()), 0);
  ASSERT_EQ(gd_unregister_state("weights"), 0);
  std::vector<uint8_t> smaller(999, 2);
  ASSERT_EQ(gd_register_buffer("weights", smaller.data(), smaller.size()), 0);
  uint64_t bytes = 0;
  Status s = RestoreState("file:" + (dir_ / kCheckpointFileName).string(), &bytes);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("1000 bytes"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("999"), std::string::npos) << s.ToString();
  EXPECT_EQ(smaller, std::vector<uint8_t>(999, 2)) << "nothing was written into it";
}

TEST_F(StateTransferTest, AFileRestoreDropsAnUnusedReserve) {
  Add("model", 4096, 3);
  uint64_t measured = 0;
  ASSERT_TRUE(ReserveForRestore(&measured).ok());
  EXPECT_GT(measured, 4096u);
  const std::string target = "file:" + (dir_ / "state.gdck").string();
  uint64_t bytes = 0;
  ASSERT_TRUE(SaveState(target, kJobId, &bytes).ok());
  ASSERT_TRUE(RestoreState(target, &bytes).ok());
  EXPECT_EQ(TakeFreshState(), nullptr) << "a mapped file needs no receive memory";
}

TEST_F(StateTransferTest, NothingRegisteredReservesNothing) {
  uint64_t measured = 1;
  ASSERT_TRUE(ReserveForRestore(&measured).ok());
  EXPECT_EQ(measured, 0u);
  EXPECT_EQ(TakeFreshState(), nullptr);
}

TEST_F(StateTransferTest, SocketStreamCutShortLoadsNothing) {
  Add("model", 6 << 20, 1);
  Listener listener((dir_ / "ctl.sock").string());
  std::vector<uint8_t> stream;
  uint64_t bytes = 0;
  ASSERT_TRUE(listener.Save(&stream, &bytes).ok());
  stream.resize(stream.size() / 2);
  std::thread tx = listener.Send(&stream);
  Status s = RestoreState(listener.target(), &bytes);
  tx.join();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("unix socket"), std::string::npos) << s.ToString();
  EXPECT_EQ(Loads(), 0);
}

TEST_F(StateTransferTest, PeerHangingUpIsAnErrorNotSigpipe) {
  Add("model", 64 << 20, 1);  // far more than the socket buffers hold
  Listener listener((dir_ / "ctl.sock").string());
  std::thread hang = listener.HangUp();
  uint64_t bytes = 0;
  Status s = SaveState(listener.target(), kJobId, &bytes);
  hang.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  // The hang-up may hit the header or the section, whichever is being written.
  EXPECT_NE(s.message().find("unix socket"), std::string::npos) << s.ToString();
  // Nobody listening at all.
  s = SaveState("unix:" + (dir_ / "nobody.sock").string(), kJobId, &bytes);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

TEST_F(StateTransferTest, CppRegisteredStateHelper) {
  uint64_t counter = 41;
  {
    RegisteredState state(
        "counter", [&](gd_writer* w) { return gd_write(w, &counter, sizeof counter) == 0; },
        [&](gd_reader* r) { return gd_read(r, &counter, sizeof counter) == sizeof counter; });
    ASSERT_TRUE(state.ok());
    ASSERT_TRUE(Checkpoint(dir_.c_str()));
    counter = 0;
    uint64_t bytes = 0;
    ASSERT_TRUE(RestoreState("file:" + (dir_ / kCheckpointFileName).string(), &bytes).ok());
    EXPECT_EQ(counter, 41u);
  }
  EXPECT_TRUE(StateRegistry::Global().Names().empty());
}

// Resident memory of this process, in MiB.
double ResidentMiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// A job restored while parked (a migration's copy) keeps its stream's memory
// until it is released, so that unmapping it does not share the cores with
// the release; then it is given back.
TEST_F(StateTransferTest, AStreamRestoredWhileParkedIsFreedAtRelease) {
  const size_t size = 96 << 20;
  Add("big", size, 12);
  Listener listener((dir_ / "ctl.sock").string());
  std::vector<uint8_t> stream;
  uint64_t bytes = 0;
  ASSERT_TRUE(listener.Save(&stream, &bytes).ok());
  FreeRestoredMemory();  // nothing kept: nothing happens
  std::thread tx = listener.Send(&stream);
  ASSERT_TRUE(RestoreState(listener.target(), &bytes, RestoreCheck::kBeforeLoading,
                           RestoredMemory::kFreeAtRelease)
                  .ok());
  tx.join();
  EXPECT_EQ(blobs_[0]->loaded, blobs_[0]->data);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double kept = ResidentMiB();
  FreeRestoredMemory();
  double now = kept;
  for (int i = 0; i < 100 && now > kept - 80; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = ResidentMiB();
  }
  EXPECT_LT(now, kept - 80) << "kept " << kept << " MiB, after the release " << now;
}

// Sanity of a large section through both targets; prints rates, asserts none.
TEST_F(StateTransferTest, LargeSectionThroughFileAndSocket) {
  const size_t size = 64 << 20;
  Add("big", size, 9);
  using Clock = std::chrono::steady_clock;
  auto rate = [&](Clock::time_point t0) {
    return size / 1e6 / std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::vector<uint8_t> copy(size);
  auto t0 = Clock::now();
  std::memcpy(copy.data(), blobs_[0]->data.data(), size);
  const double memcpy_mbs = rate(t0);

  const std::string file = "file:" + (dir_ / kCheckpointFileName).string();
  uint64_t bytes = 0;
  t0 = Clock::now();
  ASSERT_TRUE(SaveState(file, kJobId, &bytes).ok());
  const double file_write = rate(t0);
  t0 = Clock::now();
  ASSERT_TRUE(RestoreState(file, &bytes).ok());
  const double file_read = rate(t0);
  EXPECT_EQ(blobs_[0]->loaded, blobs_[0]->data);

  Listener listener((dir_ / "ctl.sock").string());
  std::vector<uint8_t> stream;
  stream.reserve(size + (1 << 20));
  std::thread rx = listener.Receive(&stream);
  t0 = Clock::now();
  ASSERT_TRUE(SaveState(listener.target(), kJobId, &bytes).ok());
  rx.join();
  const double sock_write = rate(t0);
  blobs_[0]->loaded.clear();
  std::thread tx = listener.Send(&stream);
  t0 = Clock::now();
  ASSERT_TRUE(RestoreState(listener.target(), &bytes).ok());
  tx.join();
  const double sock_read = rate(t0);
  EXPECT_EQ(blobs_[0]->loaded, blobs_[0]->data);
  std::printf(
      "64 MiB: memcpy %.0f MB/s | file write (fsync) %.0f, read+verify+load %.0f | "
      "socket write %.0f, read+verify+load %.0f MB/s\n",
      memcpy_mbs, file_write, file_read, sock_write, sock_read);
}

}  // namespace
}  // namespace gandiva::checkpoint
