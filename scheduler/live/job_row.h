// How a JobRecord maps onto a row of the jobs table: the column list, the
// checks a record must pass before it is written, binding a record to a
// statement's parameters and reading one back (command and env as JSON text).
#ifndef GANDIVA_SCHEDULER_LIVE_JOB_ROW_H_
#define GANDIVA_SCHEDULER_LIVE_JOB_ROW_H_

#include <string>

#include "gandiva/status.h"
#include "live/job_store.h"
#include "sqlite/sqlite_db.h"

namespace gandiva::sched::live::job_row {

// The jobs table's columns after `id`, comma-separated, in the order Bind binds
// and Read reads them; kColumnCount of them: the submission's, then the
// kRunColumnCount run columns of kRunColumnList (what the scheduler changes
// after a submission: state, where it runs, times, failure), then `ended`.
extern const char* const kColumnList;
extern const int kColumnCount;
extern const char* const kRunColumnList;
extern const int kRunColumnCount;

// invalid_argument for a record the store refuses (gpus or ranks < 1, empty
// command, NaN times: SQLite would store a NaN as NULL).
Status Validate(const JobRecord& job);
// The same checks on the run columns' fields only (NaN times).
Status ValidateRun(const JobRecord& job);
// Binds the record's fields to parameters first .. first + kColumnCount - 1.
// invalid_argument when command or env holds a string that is not UTF-8 (JSON
// text cannot carry it).
Status Bind(const JobRecord& job, Statement& stmt, int first);
// Binds the run columns' fields to parameters first .. first + kRunColumnCount - 1
// (not `ended`).
Status BindRun(const JobRecord& job, Statement& stmt, int first);
// Reads a row selected as "id, <kColumnList>"; data_loss (naming the file) for
// a row this build cannot decode.
StatusOr<JobRecord> Read(const Statement& stmt, const std::string& path);

}  // namespace gandiva::sched::live::job_row

#endif  // GANDIVA_SCHEDULER_LIVE_JOB_ROW_H_
