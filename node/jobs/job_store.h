// gandivad's job table on disk (STATE/jobs.db, SQLite): every job's record, whether
// it is held (suspended by its user), its device figures, and the boot it ran in.
// A gandivad started again after a crash or a restart reads it back and re-adopts
// the jobs that still run (Node::Readopt); the ended ones stay listed.
//
// The job table writes each record through as it changes (JobTable::SetStore);
// the node writes held as it changes and the device figures once a second, so a
// crash loses at most a second of slice counts. A failed write is logged and the
// node goes on: a full disk must not stop its jobs being managed.
//
// Thread-safety: one lock, a leaf below the job table's; every method takes it.
#ifndef GANDIVA_NODE_JOBS_JOB_STORE_H_
#define GANDIVA_NODE_JOBS_JOB_STORE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gandiva/status.h"
#include "jobs/job.h"

namespace gandiva::sqlite {
class SqliteDb;
}

namespace gandiva::controller {

// A job as the store holds it: the record without its live parts (control block
// and process fd), with the control block's name to open it again by.
struct StoredJob {
  Job job;  // job.block is null
  std::string block_name;
  bool held = false;
  DeviceUsage usage;  // its figures at the last flush (live jobs)
};

class JobStore {
 public:
  // Opens or creates the store at `path`: refused (the file left as it was) if it
  // is corrupt, not a gandivad job table, or written by a newer gandiva.
  static StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  const std::string& path() const;
  // Writes the job's record (inserted or replaced); held and figures are kept.
  void Put(const Job& job);
  void PutHeld(uint64_t id, bool held);
  // Every live job's figures, in one transaction.
  void PutUsage(const std::vector<std::pair<uint64_t, DeviceUsage>>& usage);
  void Erase(uint64_t id);

  // Every stored job, in id order.
  StatusOr<std::vector<StoredJob>> LoadAll();
  // The boot whose jobs the store holds ("" for a new store), and setting it.
  StatusOr<std::string> Boot();
  Status SetBoot(const std::string& boot_id);

 private:
  struct Statements;
  JobStore(std::unique_ptr<sqlite::SqliteDb> db, std::unique_ptr<Statements> statements);
  // Logs a failed write: the first of a run of failures, and the recovery.
  void Note(const Status& s, const char* what);

  std::mutex mu_;
  std::unique_ptr<sqlite::SqliteDb> db_;
  std::unique_ptr<Statements> stmts_;  // after db_: finalized before the connection closes
  bool failing_ = false;
};

// The record as the store's JSON text, and back (data_loss for text it cannot read).
std::string JobToStoredText(const Job& job);
StatusOr<Job> JobFromStoredText(const std::string& text);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_JOB_STORE_H_
