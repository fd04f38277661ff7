#include "gandiva/contract/checkpoint_layout.h"

#include <filesystem>

#include "gandiva/contract/environment.h"

namespace gandiva::checkpoint {

namespace {

std::string RankFile(const std::string& dir, int64_t k) {
  return dir + "/" + kRankDirPrefix + std::to_string(k) + "/" + kCheckpointFileName;
}

}  // namespace

Status CheckRestoreDir(const std::string& dir, int64_t ranks) {
  return CheckRestoreDir(dir, ranks, [](const std::string& path) -> char {
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(st)) return 0;
    return std::filesystem::is_directory(st) ? 'd' : 'f';
  });
}

std::vector<std::string> RestoreDirPaths(const std::string& dir, int64_t ranks) {
  std::vector<std::string> paths = {dir, dir + "/" + kGangManifestName,
                                    dir + "/" + kCheckpointFileName};
  // One rank more than the job has: a checkpoint of more ranks is told apart.
  for (int64_t k = 0; k <= ranks; ++k) paths.push_back(RankFile(dir, k));
  return paths;
}

Status CheckRestoreDir(const std::string& dir, int64_t ranks, const PathKind& kind) {
  if (kind(dir) != 'd') return NotFound(dir + " is not a directory");
  int64_t parts = 0;
  while (parts <= ranks && kind(RankFile(dir, parts)) != 0) ++parts;
  if (ranks > 1 || parts > 0) {
    if (parts != ranks || kind(dir + "/" + kGangManifestName) == 0)
      return InvalidArgument(
          dir + " holds a checkpoint of " +
          (parts > ranks ? "more than " + std::to_string(ranks) : std::to_string(parts)) +
          " rank(s) (" + kRankDirPrefix + "<k>/" + kCheckpointFileName +
          "); this job has --ranks " + std::to_string(ranks));
    return Status::Ok();
  }
  const std::string file = dir + "/" + kCheckpointFileName;
  if (kind(file) == 0) return NotFound("no checkpoint at " + file);
  return Status::Ok();
}

}  // namespace gandiva::checkpoint
