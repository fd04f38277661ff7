// Where a checkpoint directory keeps its parts (environment.h names them), and
// whether a directory holds one that a job of N ranks can restore. Checked
// before a job starts (by `gandiva run --restore` and by gandivad's launch), so
// that a wrong directory is an error at once, not a job that fails at its
// first boundary.
#ifndef GANDIVA_CONTRACT_CHECKPOINT_LAYOUT_H_
#define GANDIVA_CONTRACT_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::checkpoint {

// Ok if `dir` holds a checkpoint a job of `ranks` processes restores: DIR/state.gdck
// for one process; a gang's DIR/gang and DIR/rank-<k>/state.gdck for k < ranks.
// InvalidArgument when the rank counts differ, NotFound when there is none.
Status CheckRestoreDir(const std::string& dir, int64_t ranks);

// The same, asking `kind(path)` what is at each path it looks at: 'd' a
// directory, 'f' anything else, 0 nothing. For a caller that must look as
// another user (gandivad, for a job's user): it finds the answers first, for
// every path in RestoreDirPaths, all at once.
using PathKind = std::function<char(const std::string& path)>;
Status CheckRestoreDir(const std::string& dir, int64_t ranks, const PathKind& kind);
std::vector<std::string> RestoreDirPaths(const std::string& dir, int64_t ranks);

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CONTRACT_CHECKPOINT_LAYOUT_H_
