// A gang's checkpoint or restore: one per rank, all while the gang is parked at
// one iteration, so the parts form one consistent checkpoint.
//
// The leader's transfer target says where the whole gang's state goes:
//  - "file:DIR/state.gdck" (gandiva checkpoint DIR): rank k writes
//    DIR/rank-<k>/state.gdck, and DIR/gang says "ranks N"; `gandiva run
//    --ranks N --restore DIR` restarts every rank from its part;
//  - "sealed:SOCKET" (migration): each rank writes its stream to a file beside
//    the socket, and the gang sends one container on the sealed bulk
//    connection the migrator hands over on the socket (as to a single job):
//    "GDGANG01", the rank count (u32, little-endian), then per rank its
//    stream's length (u64) and the stream. Restoring reads the container back
//    and hands each rank its part.
#ifndef GANDIVA_NODE_JOBS_GANG_TRANSFER_H_
#define GANDIVA_NODE_JOBS_GANG_TRANSFER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "gandiva/contract/control_block.h"
#include "gandiva/status.h"

namespace gandiva::controller {

// kind: runtime::kRequestCheckpoint or kRequestRestore. Waits for every rank
// (giving up when `stopping` is set). *bytes: the state moved, all ranks together.
// The files gandivad itself makes or reads for the gang (the checkpoint's
// folders and manifest, the parts of a migration's container) are made and
// opened as owner_uid (as_user.h; < 0: gandivad's own user), never through a
// link, and copied through a fixed buffer.
Status GangTransfer(uint32_t kind, const std::string& target,
                    const std::vector<runtime::ControlBlock*>& ranks, int64_t owner_uid,
                    const std::atomic<bool>& stopping, uint64_t* bytes);

// The container's header, for tests and tools.
inline constexpr char kGangStreamMagic[8] = {'G', 'D', 'G', 'A', 'N', 'G', '0', '1'};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_GANG_TRANSFER_H_
