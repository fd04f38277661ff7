#include "gandiva/contract/checkpoint_layout.h"

#include <filesystem>

#include "gandiva/contract/environment.h"

namespace gandiva::checkpoint {

Status CheckRestoreDir(const std::string& dir, int64_t ranks) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return NotFound(dir + " is not a directory");
  int64_t parts = 0;
  while (fs::exists(root / (kRankDirPrefix + std::to_string(parts)) / kCheckpointFileName, ec))
    ++parts;
  if (ranks > 1 || parts > 0) {
    if (parts != ranks || !fs::exists(root / kGangManifestName, ec))
      return InvalidArgument(dir + " holds a checkpoint of " + std::to_string(parts) +
                             " rank(s) (" + kRankDirPrefix + "<k>/" + kCheckpointFileName +
                             "); this job has --ranks " + std::to_string(ranks));
    return Status::Ok();
  }
  if (!fs::exists(root / kCheckpointFileName, ec))
    return NotFound("no checkpoint at " + (root / kCheckpointFileName).string());
  return Status::Ok();
}

}  // namespace gandiva::checkpoint
