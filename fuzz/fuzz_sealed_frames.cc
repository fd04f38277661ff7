// libFuzzer harness: opening a migration's sealed frames (gandiva/sealed/
// sealed_frames.h, sealed_channel.h), what a destination job does with the
// bytes its bulk connection brings. The first byte picks how the rest is used:
//  - even: the rest is what arrives on the connection, read by a SealedReader
//    from a socket as the job reads it (a peer without the key: no frame may
//    open, whatever it says, and the reader must stop with an error, never
//    claim a complete stream);
//  - odd: the rest is [u16 position, u8 mask, u8 frame size] and a payload,
//    sealed into frames of that size with the key and opened again: with mask
//    0 every frame must open to the payload; else the byte at the position is
//    XORed with the mask and the frame holding it must fail, with DataLoss.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gandiva/sealed/sealed_channel.h"
#include "gandiva/sealed/sealed_frames.h"

namespace {

using namespace gandiva;
using namespace gandiva::sealed;

BulkKey FuzzKey() {
  BulkKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(0xa5 ^ i);
  return key;
}

void ReadForged(const uint8_t* data, size_t size) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  UniqueFd in(fds[0]), out(fds[1]);
  // libFuzzer's inputs are far smaller than the socket's buffer: no blocking.
  if (size > 0 && send(out.get(), data, size, MSG_NOSIGNAL) != static_cast<ssize_t>(size))
    std::abort();
  out.Reset();
  SealedReader reader(std::move(in), FuzzKey(), 0);
  std::vector<uint8_t> buf(4096);
  for (;;) {
    StatusOr<size_t> got = reader.Read(buf.data(), buf.size(), 1000);
    if (!got.ok()) {
      if (got.status().code() != StatusCode::kDataLoss) std::abort();
      break;
    }
    // Forging a frame means guessing a 128-bit tag: if one opened, authentication is broken.
    std::abort();
  }
  if (reader.done()) std::abort();
}

void TamperSealed(const uint8_t* data, size_t size) {
  if (size < 4) return;
  const size_t position = data[0] | size_t{data[1]} << 8;
  const uint8_t mask = data[2];
  const size_t frame_payload = size_t{data[3]} + 1;
  const std::vector<uint8_t> payload(data + 4, data + size);

  const BulkKey key = FuzzKey();
  FrameSealer sealer(key, 7);
  std::vector<std::vector<uint8_t>> frames;
  for (size_t off = 0; off < payload.size() || frames.empty(); off += frame_payload) {
    const size_t n = std::min(frame_payload, payload.size() - std::min(off, payload.size()));
    std::vector<uint8_t> frame(kSealedHeaderBytes + n + kSealedTagBytes);
    if (!sealer.Seal(kSealedData, {payload.data() + std::min(off, payload.size()), n}, frame.data())
             .ok())
      std::abort();
    frames.push_back(std::move(frame));
  }
  size_t total = 0;
  for (const auto& f : frames) total += f.size();
  size_t hit = frames.size();  // the frame the flip lands in
  if (mask != 0) {
    size_t at = position % total;
    for (hit = 0; at >= frames[hit].size(); ++hit) at -= frames[hit].size();
    frames[hit][at] ^= mask;
  }
  FrameOpener opener(key, 7);
  std::vector<uint8_t> opened;
  for (size_t i = 0; i < frames.size(); ++i) {
    std::vector<uint8_t>& f = frames[i];
    Status s;
    StatusOr<SealedHeader> header = opener.CheckHeader(f.data());
    if (!header.ok()) {
      s = header.status();
    } else if (kSealedHeaderBytes + header->length + kSealedTagBytes != f.size()) {
      s = DataLoss("the header's length is not the frame's");  // as a reader would misread
    } else {
      s = opener.Open(f.data(), f.data() + kSealedHeaderBytes,
                      f.data() + kSealedHeaderBytes + header->length);
    }
    if (i == hit) {
      if (s.code() != StatusCode::kDataLoss) std::abort();  // a changed frame opened
      return;
    }
    if (!s.ok()) std::abort();  // an untouched frame did not
    opened.insert(opened.end(), f.begin() + kSealedHeaderBytes, f.end() - kSealedTagBytes);
  }
  if (opened != payload) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1)
    TamperSealed(data + 1, size - 1);
  else
    ReadForged(data + 1, size - 1);
  return 0;
}
