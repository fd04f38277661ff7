// What the job runtime calls to checkpoint and restore the job's registered
// state (gd_register_state): a self-describing stream of checksummed chunks
// written to, or read from, a target:
//   "file:/abs/path"      a checkpoint file
//   "sealed:/abs/socket"  migration: the job takes the sealed bulk connection
//                         its controller hands over on the socket, and writes
//                         or reads the stream on it (job to job)
//   "unix:/abs/socket"    the stream itself on a Unix socket someone listens on
#ifndef GANDIVA_CHECKPOINT_STATE_TRANSFER_H_
#define GANDIVA_CHECKPOINT_STATE_TRANSFER_H_

#include <cstdint>
#include <string>

#include "gandiva/contract/environment.h"
#include "gandiva/status.h"

namespace gandiva::checkpoint {

// Writes every registered state to target. job_id goes into the stream's
// header (the caller's, e.g. JobRuntime::job_id(); 0 when unmanaged).
// *bytes: bytes written. FailedPrecondition, with nothing written, when no
// state is registered (the message says what to register).
Status SaveState(const std::string& target, uint64_t job_id, uint64_t* bytes);
// When a restore checks the chunks' checksums: all before the first load
// function runs, or each as it is loaded, on a second thread ahead of the
// load (one pass less over a file; off the receiving thread of a socket).
// Either way no load function sees an unchecked byte, but kWhileLoading may
// fail after some sections were loaded: only for a restore whose failure
// ends the process (a job's start-up restore) or discards it (a migration's
// warm copy).
enum class RestoreCheck { kBeforeLoading, kWhileLoading };

// When the memory a restore read its stream into (slabs, a mapped file) is
// given back: unmapping costs ~15-20 ms of a core per GiB. Either way on a
// thread of its own; kFreeAtRelease waits for FreeRestoredMemory(), for a job
// restored while parked, whose release (a migration's switch) would
// otherwise share the cores with it.
enum class RestoredMemory { kFreeNow, kFreeAtRelease };

// Reads a stream from target, verifies every chunk, and loads each section
// into the state registered under its name. *bytes: bytes read.
Status RestoreState(const std::string& target, uint64_t* bytes,
                    RestoreCheck check = RestoreCheck::kBeforeLoading,
                    RestoredMemory memory = RestoredMemory::kFreeNow);
// Gives back the memory a kFreeAtRelease restore kept, if any (the job
// runtime calls it as a parked job resumes). Cheap when there is none.
void FreeRestoredMemory();
// Ahead of a restore that will come over a socket (a migration's destination,
// GANDIVA_ARRIVING): writes the registered state, fresh, into memory kept for
// the arriving stream (faulted in now, not in the downtime), and keeps it as
// the pre-copy its source is told of: chunks that are still as they were when
// the job started are then not sent. *bytes: the state's stream size (0 when
// nothing is registered).
Status ReserveForRestore(uint64_t* bytes);

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_STATE_TRANSFER_H_
