// The copy floor under a migration of N MiB: a memcpy of the bytes, a Unix
// socket hop (each migration makes two), a plain TCP transfer over 127.0.0.1
// (the floor the migration is measured against; tcp_plain_lowat with the
// sealed reader's SO_RCVLOWAT), the same bytes over
// gandivad's sealed bulk channel (tcp_sealed: OpenSSL's AES-256-GCM frames,
// node/migration/bulk_channel, written and read as the two jobs do),
// and raw ZeroMQ transfers in 4 MiB messages between two contexts (as between
// two gandivad), without and with CURVE (what carried the state before the
// bulk channel). Prints a table; --json prints one object.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gandiva/sealed/sealed_frames.h"
#include "migration/bulk_channel.h"
#include "speed_table.h"

namespace {

struct Options {
  uint64_t mib = 1024;
  uint64_t chunk_kib = 4096;
  int window = 4;  // messages queued ahead of the receiver (as MigrateOut's window)
  int repeat = 3;
  bool json = false;
};

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o->json = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--mib")
      o->mib = std::strtoull(v, nullptr, 10);
    else if (a == "--chunk-mib")
      o->chunk_kib = std::strtoull(v, nullptr, 10) << 10;
    else if (a == "--chunk-kib")
      o->chunk_kib = std::strtoull(v, nullptr, 10);
    else if (a == "--window")
      o->window = std::atoi(v);
    else if (a == "--repeat")
      o->repeat = std::atoi(v);
    else
      return false;
  }
  return o->mib > 0 && o->chunk_kib > 0 && o->chunk_kib <= (8 << 10) && o->window > 0 &&
         o->repeat > 0;
}

using gandiva::bench::Now;

// Anonymous memory (speed_table.h), faulted in unless fresh: the floor copies
// into memory that is ready.
char* Map(size_t n, bool fault_in) {
  return reinterpret_cast<char*>(gandiva::bench::MapAnonymous(n, fault_in));
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "transfer_floor: %s: %s\n", what, zmq_strerror(zmq_errno()));
    std::exit(1);
  }
}

struct Result {
  double best_s = 1e30;
  double median_s = 0;
  std::vector<double> runs;
  void Add(double s) {
    runs.push_back(s);
    best_s = std::min(best_s, s);
    std::vector<double> r = runs;
    std::sort(r.begin(), r.end());
    median_s = r[r.size() / 2];
  }
};

// memcpy of the whole state into memory that is faulted in (warm) or fresh
// (page faults included, as when a destination receives into new memory).
double Memcpy(const char* src, size_t n, bool warm) {
  char* dst = Map(n, warm);
  const double t0 = Now();
  std::memcpy(dst, src, n);
  const double t = Now() - t0;
  munmap(dst, n);
  return t;
}

// One Unix stream socket hop, as job -> controller or controller -> job:
// the writer sends chunk-sized writes, the reader lands the bytes in dst.
double UnixHop(const char* src, char* dst, size_t n, size_t chunk) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    std::perror("socketpair");
    std::exit(1);
  }
  const int buf = 4 << 20;  // what the checkpoint sink and source ask for
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  const double t0 = Now();
  std::thread writer([&] {
    for (size_t off = 0; off < n;) {
      ssize_t w = write(sv[0], src + off, std::min(chunk, n - off));
      if (w <= 0) std::exit(1);
      off += static_cast<size_t>(w);
    }
    close(sv[0]);
  });
  for (size_t off = 0; off < n;) {
    ssize_t r = read(sv[1], dst + off, std::min(chunk, n - off));
    if (r <= 0) std::exit(1);
    off += static_cast<size_t>(r);
  }
  const double t = Now() - t0;
  writer.join();
  close(sv[1]);
  return t;
}

// src written in chunk-sized writes over one loopback TCP connection (made
// before the clock starts), read by the receiver straight into dst.
// With wake_low_water, the reader is woken only once that much has arrived
// (SO_RCVLOWAT), as the sealed reader is: the same socket setting both ways.
double TcpPlain(const char* src, char* dst, size_t n, size_t chunk, size_t wake_low_water = 0) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("tcp listen");
    std::exit(1);
  }
  const int out = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(out, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::exit(1);
  const int in = accept(listener, nullptr, nullptr);
  const double t0 = Now();
  std::thread writer([&] {
    for (size_t off = 0; off < n;) {
      ssize_t w = write(out, src + off, std::min(chunk, n - off));
      if (w <= 0) std::exit(1);
      off += static_cast<size_t>(w);
    }
    close(out);
  });
  for (size_t off = 0; off < n;) {
    if (wake_low_water > 0) {
      const int low = static_cast<int>(std::min(wake_low_water, n - off));
      setsockopt(in, SOL_SOCKET, SO_RCVLOWAT, &low, sizeof low);
    }
    ssize_t r = read(in, dst + off, std::min(chunk, n - off));
    if (r <= 0) std::exit(1);
    off += static_cast<size_t>(r);
  }
  const double t = Now() - t0;
  writer.join();
  close(in);
  close(listener);
  return t;
}

// The same over a migration's sealed bulk connection (AES-256-GCM frames),
// opened as two gandivad open it and written and read as the two jobs do:
// the writer seals the bytes in 512 KiB frames, the reader opens them into dst.
double TcpSealed(const char* src, char* dst, size_t n, size_t chunk) {
  using namespace gandiva::controller;
  auto listener = BulkListener::Listen("127.0.0.1");
  auto key = gandiva::sealed::NewBulkKey();
  if (!listener.ok() || !key.ok()) std::exit(1);
  const double t0 = Now();
  std::thread writer([&] {
    auto sender = ConnectBulk("127.0.0.1", (*listener)->port(), *key, 1, 30000);
    if (!sender.ok()) std::exit(1);
    for (size_t off = 0; off < n; off += chunk)
      if (!(*sender)->Write(src + off, std::min(chunk, n - off)).ok()) std::exit(1);
    if (!(*sender)->Finish().ok()) std::exit(1);
  });
  auto receiver = (*listener)->Accept(*key, 1, 30000, nullptr);
  if (!receiver.ok()) std::exit(1);
  for (size_t off = 0;;) {
    auto got = (*receiver)->Read(dst + off, std::max<size_t>(n - off, 1), 30000);
    if (!got.ok()) {
      std::fprintf(stderr, "transfer_floor: %s\n", got.status().ToString().c_str());
      std::exit(1);
    }
    if (*got == 0) break;
    off += *got;
  }
  const double t = Now() - t0;
  writer.join();
  return t;
}

// src sent in chunk-sized messages PUSH -> PULL over loopback TCP, each side
// with its own context (one I/O thread each, as two gandivad); the receiver
// copies each message into dst. The connection (and CURVE handshake) is made
// before the clock starts. The sender's messages point at src: no copy there.
double Zmq(const char* src, char* dst, size_t n, size_t chunk, int window, bool curve) {
  void* rctx = zmq_ctx_new();
  void* sctx = zmq_ctx_new();
  void* pull = zmq_socket(rctx, ZMQ_PULL);
  void* push = zmq_socket(sctx, ZMQ_PUSH);
  int hwm = window;
  zmq_setsockopt(pull, ZMQ_RCVHWM, &hwm, sizeof(hwm));
  zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof(hwm));
  if (curve) {
    char server_pub[41], server_sec[41], client_pub[41], client_sec[41];
    Check(zmq_curve_keypair(server_pub, server_sec) == 0, "zmq_curve_keypair");
    Check(zmq_curve_keypair(client_pub, client_sec) == 0, "zmq_curve_keypair");
    int one = 1;
    zmq_setsockopt(pull, ZMQ_CURVE_SERVER, &one, sizeof(one));
    zmq_setsockopt(pull, ZMQ_CURVE_SECRETKEY, server_sec, 40);
    zmq_setsockopt(push, ZMQ_CURVE_SERVERKEY, server_pub, 40);
    zmq_setsockopt(push, ZMQ_CURVE_PUBLICKEY, client_pub, 40);
    zmq_setsockopt(push, ZMQ_CURVE_SECRETKEY, client_sec, 40);
  }
  Check(zmq_bind(pull, "tcp://127.0.0.1:*") == 0, "bind");
  char endpoint[256];
  size_t len = sizeof(endpoint);
  zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, endpoint, &len);
  Check(zmq_connect(push, endpoint) == 0, "connect");
  // Handshake first: one small message through.
  char hello = 'h';
  Check(zmq_send(push, &hello, 1, 0) == 1, "send hello");
  Check(zmq_recv(pull, &hello, 1, 0) == 1, "recv hello");

  const size_t messages = (n + chunk - 1) / chunk;
  const double t0 = Now();
  std::thread sender([&] {
    for (size_t i = 0; i < messages; ++i) {
      const size_t off = i * chunk, len = std::min(chunk, n - off);
      zmq_msg_t m;
      zmq_msg_init_data(&m, const_cast<char*>(src + off), len, nullptr, nullptr);
      if (zmq_msg_send(&m, push, 0) < 0) std::exit(1);
    }
  });
  for (size_t i = 0; i < messages; ++i) {
    const size_t off = i * chunk, len = std::min(chunk, n - off);
    zmq_msg_t m;
    zmq_msg_init(&m);
    Check(zmq_msg_recv(&m, pull, 0) == static_cast<int>(len), "recv");
    std::memcpy(dst + off, zmq_msg_data(&m), len);
    zmq_msg_close(&m);
  }
  const double t = Now() - t0;
  sender.join();
  int zero = 0;
  zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof(zero));
  zmq_setsockopt(pull, ZMQ_LINGER, &zero, sizeof(zero));
  zmq_close(push);
  zmq_close(pull);
  zmq_ctx_term(sctx);
  zmq_ctx_term(rctx);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!Parse(argc, argv, &opt)) {
    std::fprintf(
        stderr,
        "usage: transfer_floor [--mib N] [--chunk-mib N | --chunk-kib N] [--window N] [--repeat N] "
        "[--json]\n");
    return 2;
  }
  const size_t n = opt.mib << 20, chunk = opt.chunk_kib << 10;
  char* src = Map(n, true);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = i * 0x9e3779b97f4a7c15ull;  // not compressible, not all zero pages
    std::memcpy(src + i, &v, std::min<size_t>(8, n - i));
  }
  char* dst = Map(n, true);  // faulted in once, reused by every transfer

  struct Row {
    const char* name;
    Result r;
  };
  std::vector<Row> rows = {{"memcpy_warm", {}}, {"memcpy_fresh", {}},    {"unix_socket", {}},
                           {"tcp_plain", {}},   {"tcp_plain_lowat", {}}, {"tcp_sealed", {}},
                           {"zmq_tcp", {}},     {"zmq_tcp_curve", {}}};
  for (int k = 0; k < opt.repeat; ++k) {
    rows[0].r.Add(Memcpy(src, n, true));
    rows[1].r.Add(Memcpy(src, n, false));
    rows[2].r.Add(UnixHop(src, dst, n, chunk));
    rows[3].r.Add(TcpPlain(src, dst, n, chunk));
    rows[4].r.Add(TcpPlain(src, dst, n, chunk, 128 << 10));  // the sealed reader's low water
    rows[5].r.Add(TcpSealed(src, dst, n, chunk));
    rows[6].r.Add(Zmq(src, dst, n, chunk, opt.window, false));
    rows[7].r.Add(Zmq(src, dst, n, chunk, opt.window, true));
  }
  if (std::memcmp(src, dst, n) != 0) {
    std::fprintf(stderr, "transfer_floor: received bytes differ from the sent ones\n");
    return 1;
  }
  if (opt.json) {
    std::printf(
        "{\"mib\": %llu, \"bytes\": %zu, \"chunk_bytes\": %zu, \"window\": %d, \"repeat\": %d",
        static_cast<unsigned long long>(opt.mib), n, chunk, opt.window, opt.repeat);
    for (const Row& row : rows)
      std::printf(", \"%s\": {\"best_ms\": %.3f, \"median_ms\": %.3f, \"best_gbps\": %.3f}",
                  row.name, row.r.best_s * 1e3, row.r.median_s * 1e3, n / row.r.best_s / 1e9);
    std::printf("}\n");
  } else {
    std::printf("%llu MiB in %llu KiB pieces, best of %d (median)\n",
                static_cast<unsigned long long>(opt.mib),
                static_cast<unsigned long long>(opt.chunk_kib), opt.repeat);
    std::printf("%-18s %12s %12s %9s\n", "path", "best ms", "median ms", "GB/s");
    for (const Row& row : rows)
      std::printf("%-18s %12.1f %12.1f %9.2f\n", row.name, row.r.best_s * 1e3, row.r.median_s * 1e3,
                  n / row.r.best_s / 1e9);
  }
  return 0;
}
