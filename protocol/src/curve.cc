// CURVE key generation and key files; see curve.h.
#include "gandiva/protocol/curve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace gandiva::protocol {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// A key or key-list file opens for reading only when it is a regular file. A
// directory opens fine as an ifstream, but libstdc++ then throws
// std::ios_failure ("Is a directory") from the first read, which would end
// gandivad on a mistyped path (found by fuzz/fuzz_key_files); and a device such
// as /dev/zero would be read forever.
bool OpenKeyFile(const std::string& path, std::ifstream* in) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  in->open(path);
  return static_cast<bool>(*in);
}

}  // namespace

bool IsZ85Key(const std::string& text) {
  if (text.size() != 40) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, text.c_str()) != nullptr;
}

StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  if (!zmq_has("curve")) return Unimplemented("this libzmq has no CURVE support");
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) return Internal("zmq_curve_keypair failed");
  return CurveKeyPair{pub, sec};
}

Status WriteCurveKeyPair(const std::string& dir, const std::string& name,
                         const CurveKeyPair& keys) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string key_path = dir + "/" + name + ".key";
  const std::string pub_path = dir + "/" + name + ".pub";
  int fd = open(key_path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return AlreadyExists("cannot create " + key_path + " (exists already?)");
  const std::string body = "public " + keys.public_key + "\nsecret " + keys.secret_key + "\n";
  const bool ok = write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
  close(fd);
  if (!ok) return Internal("cannot write " + key_path);
  std::ofstream pub(pub_path);
  pub << keys.public_key << "\n";
  if (!pub) return Internal("cannot write " + pub_path);
  return Status::Ok();
}

StatusOr<CurveKeyPair> ReadCurveKeyPair(const std::string& key_file) {
  std::ifstream in;
  if (!OpenKeyFile(key_file, &in)) return NotFound("cannot read key file " + key_file);
  CurveKeyPair keys;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, value;
    words >> kind >> value;
    if (kind == "public") keys.public_key = value;
    if (kind == "secret") keys.secret_key = value;
  }
  if (!IsZ85Key(keys.public_key) || !IsZ85Key(keys.secret_key))
    return InvalidArgument(key_file + " is not a gandiva key file (see `gandiva keygen`)");
  return keys;
}

StatusOr<std::string> ReadCurvePublicKey(const std::string& key_or_file) {
  if (IsZ85Key(key_or_file)) return key_or_file;
  std::ifstream in;
  if (!OpenKeyFile(key_or_file, &in))
    return NotFound("'" + key_or_file + "' is neither a public key nor a readable file");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = Trim(text);
  if (text.rfind("public ", 0) == 0) text = Trim(text.substr(7, 41));  // a .key file
  if (!IsZ85Key(text)) return InvalidArgument(key_or_file + " holds no Z85 public key");
  return text;
}

StatusOr<CurveClientKeys> ReadCurveClientKeys(const std::string& key_file,
                                              const std::string& server_key_or_file) {
  GD_ASSIGN_OR_RETURN(CurveKeyPair mine, ReadCurveKeyPair(key_file));
  GD_ASSIGN_OR_RETURN(std::string theirs, ReadCurvePublicKey(server_key_or_file));
  return CurveClientKeys{std::move(mine), std::move(theirs)};
}

Status ForEachKeyFileLine(
    const std::string& file, const std::string& what,
    const std::function<Status(const std::string& line, const std::string& where)>& fn) {
  std::ifstream in;
  if (!OpenKeyFile(file, &in)) return NotFound("cannot read " + what + " " + file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    // '#' is also a Z85 character: only a line that starts with it is a comment.
    if (auto first = line.find_first_not_of(" \t");
        first != std::string::npos && line[first] == '#')
      continue;
    GD_RETURN_IF_ERROR(fn(line, file + ":" + std::to_string(n)));
  }
  return Status::Ok();
}

StatusOr<AuthorizedKeys> ReadAuthorizedKeys(const std::string& file) {
  AuthorizedKeys keys;
  GD_RETURN_IF_ERROR(ForEachKeyFileLine(
      file, "authorized keys", [&](const std::string& text, const std::string& where) {
        const std::string line = Trim(text);
        if (line.empty()) return Status::Ok();
        const size_t space = line.find_first_of(" \t");
        const std::string key = line.substr(0, space);
        if (!IsZ85Key(key)) return InvalidArgument(where + ": not a Z85 public key");
        std::string name = space == std::string::npos ? "" : Trim(line.substr(space));
        if (name.empty()) name = "key " + key.substr(0, 8);
        if (name.size() > 64)
          return InvalidArgument(where + ": a key's name is at most 64 characters");
        keys[key] = name;
        return Status::Ok();
      }));
  return keys;
}

}  // namespace gandiva::protocol
