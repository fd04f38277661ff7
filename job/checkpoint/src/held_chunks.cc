// The manifest of held chunks (held_chunks.h): written by the destination
// job, read and matched against by the source job's stream writer.
#include "held_chunks.h"

#include <cstring>

namespace gandiva::checkpoint {
namespace {

constexpr char kHeldMagic[8] = {'G', 'D', 'H', 'E', 'L', 'D', '1', '\n'};

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof v);
}

// Reads the manifest front to back; any read past its end marks it bad.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  bool Take(void* out, size_t n) {
    if (bytes_.size() - pos_ < n) return false;
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Get(T* v) {
    return Take(v, sizeof *v);
  }
  bool AtEnd() const { return pos_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<uint8_t> EncodeHeldChunks(const sealed::BulkKey& key,
                                      const std::vector<HeldSection>& sections) {
  std::vector<uint8_t> out(kHeldMagic, kHeldMagic + sizeof kHeldMagic);
  out.insert(out.end(), key.begin(), key.end());
  Put<uint32_t>(&out, static_cast<uint32_t>(sections.size()));
  for (const HeldSection& s : sections) {
    Put<uint16_t>(&out, static_cast<uint16_t>(s.name.size()));
    out.insert(out.end(), s.name.begin(), s.name.end());
    Put<uint32_t>(&out, static_cast<uint32_t>(s.chunks.size()));
    for (const HeldChunk& c : s.chunks) {
      Put(&out, c.length);
      Put(&out, c.crc);
      out.insert(out.end(), c.tag.begin(), c.tag.end());
    }
  }
  return out;
}

StatusOr<HeldChunks> HeldChunks::Parse(std::span<const uint8_t> manifest) {
  if (manifest.empty()) return HeldChunks(sealed::BulkKey{});
  const auto bad = [](const std::string& why) {
    return DataLoss("malformed list of the chunks the destination holds: " + why);
  };
  Cursor in(manifest);
  char magic[sizeof kHeldMagic];
  sealed::BulkKey key;
  uint32_t sections = 0;
  if (!in.Take(magic, sizeof magic) || std::memcmp(magic, kHeldMagic, sizeof magic) != 0)
    return bad("bad magic");
  if (!in.Take(key.data(), key.size()) || !in.Get(&sections)) return bad("cut short");
  HeldChunks held(key);
  for (uint32_t i = 0; i < sections; ++i) {
    uint16_t name_length = 0;
    uint32_t chunks = 0;
    if (!in.Get(&name_length)) return bad("cut short");
    std::string name(name_length, '\0');
    if (!in.Take(name.data(), name.size()) || !in.Get(&chunks)) return bad("cut short");
    // Each chunk takes 24 bytes: a count the manifest cannot hold is refused
    // before anything is allocated for it.
    if (chunks > manifest.size() / 24) return bad("section '" + name + "' claims too many chunks");
    std::vector<HeldChunk> list(chunks);
    for (HeldChunk& c : list)
      if (!in.Get(&c.length) || !in.Get(&c.crc) || !in.Take(c.tag.data(), c.tag.size()))
        return bad("cut short");
    held.chunks_ += list.size();
    if (!held.sections_.emplace(std::move(name), Placed{i, std::move(list)}).second)
      return bad("a section appears twice");
  }
  if (!in.AtEnd()) return bad("bytes after the last section");
  return held;
}

std::optional<sealed::ChunkTag> HeldChunks::Holds(const std::string& section, size_t index,
                                                  std::span<const uint8_t> bytes, uint32_t crc) {
  const auto it = sections_.find(section);
  if (it == sections_.end() || index >= it->second.chunks.size()) return std::nullopt;
  const HeldChunk& held = it->second.chunks[index];
  if (held.length != bytes.size() || held.crc != crc) return std::nullopt;
  StatusOr<sealed::ChunkTag> tag = tagger_.Of({it->second.position, index}, bytes);
  if (!tag.ok() || *tag != held.tag) return std::nullopt;  // no tag: send the chunk
  bytes_held_ += bytes.size();
  return *tag;
}

}  // namespace gandiva::checkpoint
