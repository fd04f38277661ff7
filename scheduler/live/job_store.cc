#include "live/job_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>

#include "gandiva/common/log.h"
#include "live/job_row.h"
#include "sqlite/owned_db.h"

namespace gandiva::sched::live {

using sqlite::ResetOnExit;

namespace {

constexpr std::array<std::pair<LiveJobState, const char*>, 8> kStateNames{{
    {LiveJobState::kValidating, "validating"},
    {LiveJobState::kQueued, "queued"},
    {LiveJobState::kStarting, "starting"},
    {LiveJobState::kRunning, "running"},
    {LiveJobState::kSuspended, "suspended"},
    {LiveJobState::kFinished, "finished"},
    {LiveJobState::kFailed, "failed"},
    {LiveJobState::kCancelled, "cancelled"},
}};

// What marks a file as ours, and the layout this build reads and writes. A
// change to the tables bumps the schema version (and needs an upgrade here).
sqlite::OwnedFormat Format() {
  sqlite::OwnedFormat f;
  f.label = {"scheduler database", "gandiva scheduler database"};
  f.format = "gandiva-scheduler";
  // Version 2 added jobs.kind; 3 failure, retries, not_before; 4 uid; 5 the
  // migration under way (move_from_node, move_from_device, move_from_job).
  f.schema_version = 5;
  f.schema_sql =
      // AUTOINCREMENT: an id is never handed out twice, even if rows are deleted one day.
      "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,"
      " name TEXT NOT NULL, user TEXT NOT NULL, vc TEXT NOT NULL, gpus INTEGER NOT NULL,"
      " ranks INTEGER NOT NULL, command TEXT NOT NULL, cwd TEXT NOT NULL, env TEXT NOT NULL,"
      " restartable INTEGER NOT NULL, submit_time REAL NOT NULL, state TEXT NOT NULL,"
      " attempt INTEGER NOT NULL, node TEXT NOT NULL, device TEXT NOT NULL,"
      " node_job INTEGER NOT NULL, checkpoint_dir TEXT NOT NULL, checkpoint_time REAL NOT NULL,"
      " start_time REAL NOT NULL, end_time REAL NOT NULL, attained REAL NOT NULL,"
      " run_time REAL NOT NULL, exit_code INTEGER NOT NULL, detail TEXT NOT NULL,"
      " cancel_requested INTEGER NOT NULL, ended INTEGER NOT NULL, kind TEXT NOT NULL,"
      " failure TEXT NOT NULL DEFAULT '', retries INTEGER NOT NULL DEFAULT 0,"
      " not_before REAL NOT NULL DEFAULT 0, uid INTEGER NOT NULL DEFAULT -1,"
      " move_from_node TEXT NOT NULL DEFAULT '', move_from_device TEXT NOT NULL DEFAULT '',"
      " move_from_job INTEGER NOT NULL DEFAULT 0);"
      // List(false) walks only the jobs that have not ended, in id order.
      "CREATE INDEX IF NOT EXISTS jobs_not_ended ON jobs(id) WHERE ended = 0;"
      "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";
  f.upgrade_sql = [](int from) {
    std::string sql;
    if (from < 2) sql += "ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT '';";
    if (from < 3)
      sql +=
          "ALTER TABLE jobs ADD COLUMN failure TEXT NOT NULL DEFAULT '';"
          "ALTER TABLE jobs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;"
          "ALTER TABLE jobs ADD COLUMN not_before REAL NOT NULL DEFAULT 0;";
    if (from < 4) sql += "ALTER TABLE jobs ADD COLUMN uid INTEGER NOT NULL DEFAULT -1;";
    // An older build kept a migration under way in memory only: none is stored.
    if (from < 5)
      sql +=
          "ALTER TABLE jobs ADD COLUMN move_from_node TEXT NOT NULL DEFAULT '';"
          "ALTER TABLE jobs ADD COLUMN move_from_device TEXT NOT NULL DEFAULT '';"
          "ALTER TABLE jobs ADD COLUMN move_from_job INTEGER NOT NULL DEFAULT 0;";
    return sql;
  };
  return f;
}

}  // namespace

const char* LiveJobStateName(LiveJobState state) {
  for (const auto& [s, name] : kStateNames) {
    if (s == state) return name;
  }
  return "unknown";
}

std::optional<LiveJobState> ParseLiveJobState(std::string_view name) {
  for (const auto& [s, n] : kStateNames) {
    if (name == n) return s;
  }
  return std::nullopt;
}

bool IsEnded(LiveJobState state) {
  return state == LiveJobState::kFinished || state == LiveJobState::kFailed ||
         state == LiveJobState::kCancelled;
}

namespace {

// "name = ?1, user = ?2, ..." for a comma-separated column list.
std::string Assignments(const std::string& columns, int count) {
  std::string assignments;
  size_t start = 0;
  for (int i = 1; i <= count; ++i) {
    size_t end = columns.find(',', start);
    assignments +=
        (i > 1 ? ", " : "") + columns.substr(start, end - start) + " = ?" + std::to_string(i);
    start = end == std::string::npos ? end : columns.find_first_not_of(' ', end + 1);
  }
  return assignments;
}

}  // namespace

struct JobStore::Statements {
  std::unique_ptr<Statement> insert, update, update_run, update_run_live, get, list_all,
      list_not_ended, set_meta, get_meta;

  static StatusOr<std::unique_ptr<Statements>> Prepare(const SqliteDb& db) {
    const std::string columns = job_row::kColumnList;
    const std::string select = "SELECT id, " + columns + " FROM jobs ";
    std::string params;
    for (int i = 1; i <= job_row::kColumnCount; ++i) params += (i > 1 ? ", ?" : "?");
    auto s = std::make_unique<Statements>();
    GD_ASSIGN_OR_RETURN(s->insert, Statement::Prepare(db, "INSERT INTO jobs (" + columns +
                                                              ") VALUES (" + params + ")"));
    GD_ASSIGN_OR_RETURN(
        s->update,
        Statement::Prepare(db, "UPDATE jobs SET " + Assignments(columns, job_row::kColumnCount) +
                                   " WHERE id = ?" + std::to_string(job_row::kColumnCount + 1)));
    // The run columns, with `ended` (a job that ends leaves the partial index
    // jobs_not_ended), or without it for a job that has not ended and had
    // not: SQLite then leaves the index alone (a pass writes hundreds).
    const std::string run = Assignments(job_row::kRunColumnList, job_row::kRunColumnCount);
    const int n = job_row::kRunColumnCount;
    GD_ASSIGN_OR_RETURN(
        s->update_run,
        Statement::Prepare(db, "UPDATE jobs SET " + run + ", ended = ?" + std::to_string(n + 1) +
                                   " WHERE id = ?" + std::to_string(n + 2)));
    GD_ASSIGN_OR_RETURN(s->update_run_live,
                        Statement::Prepare(db, "UPDATE jobs SET " + run + " WHERE id = ?" +
                                                   std::to_string(n + 1) + " AND ended = 0"));
    GD_ASSIGN_OR_RETURN(s->get, Statement::Prepare(db, select + "WHERE id = ?1"));
    GD_ASSIGN_OR_RETURN(s->list_all, Statement::Prepare(db, select + "ORDER BY id"));
    GD_ASSIGN_OR_RETURN(s->list_not_ended,
                        Statement::Prepare(db, select + "WHERE ended = 0 ORDER BY id"));
    GD_ASSIGN_OR_RETURN(s->set_meta, Statement::Prepare(db,
                                                        "INSERT INTO meta (key, value) VALUES "
                                                        "(?1, ?2) ON CONFLICT(key) DO UPDATE SET "
                                                        "value = excluded.value"));
    GD_ASSIGN_OR_RETURN(s->get_meta,
                        Statement::Prepare(db, "SELECT value FROM meta WHERE key = ?1"));
    return s;
  }
};

JobStore::JobStore(std::unique_ptr<SqliteDb> db, std::unique_ptr<Statements> statements)
    : db_(std::move(db)), stmts_(std::move(statements)) {}

// Statements are finalized (stmts_ declared last, destroyed first) before the
// connection closes; the last close checkpoints the WAL into the main file.
JobStore::~JobStore() = default;

const std::string& JobStore::path() const { return db_->path(); }

StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  GD_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, sqlite::OpenOwned(path, Format()));
  GD_ASSIGN_OR_RETURN(std::unique_ptr<Statements> statements, Statements::Prepare(*db));
  return std::unique_ptr<JobStore>(new JobStore(std::move(db), std::move(statements)));
}

StatusOr<int64_t> JobStore::Add(JobRecord job) {
  if (job.id != 0) {
    return InvalidArgument("JobStore::Add assigns the id; the job already has id " +
                           std::to_string(job.id));
  }
  GD_RETURN_IF_ERROR(job_row::Validate(job));
  Statement& insert = *stmts_->insert;
  ResetOnExit reset(insert);
  GD_RETURN_IF_ERROR(job_row::Bind(job, insert, 1));
  GD_RETURN_IF_ERROR(insert.Run());  // autocommit: committed and fsync'd here
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_->handle()));
}

Status JobStore::UpdateRun(const JobRecord& job) {
  GD_RETURN_IF_ERROR(job_row::ValidateRun(job));
  const int n = job_row::kRunColumnCount;
  if (!IsEnded(job.state)) {
    // A job that has not ended, stored as not ended: one row, no index.
    Statement& live = *stmts_->update_run_live;
    ResetOnExit reset(live);
    GD_RETURN_IF_ERROR(job_row::BindRun(job, live, 1));
    live.BindInt(n + 1, job.id);
    GD_RETURN_IF_ERROR(live.Run());
    if (sqlite3_changes64(db_->handle()) == 1) return Status::Ok();
  }
  // It ended, or its row says it had (or there is none): `ended` too.
  Statement& update = *stmts_->update_run;
  ResetOnExit reset(update);
  GD_RETURN_IF_ERROR(job_row::BindRun(job, update, 1));
  update.BindInt(n + 1, IsEnded(job.state) ? 1 : 0);
  update.BindInt(n + 2, job.id);
  GD_RETURN_IF_ERROR(update.Run());
  if (sqlite3_changes64(db_->handle()) == 0) {
    return NotFound("no job " + std::to_string(job.id) + " in the scheduler database");
  }
  return Status::Ok();
}

Status JobStore::Update(const JobRecord& job) {
  GD_RETURN_IF_ERROR(job_row::Validate(job));
  Statement& update = *stmts_->update;
  ResetOnExit reset(update);
  GD_RETURN_IF_ERROR(job_row::Bind(job, update, 1));
  update.BindInt(job_row::kColumnCount + 1, job.id);
  GD_RETURN_IF_ERROR(update.Run());
  if (sqlite3_changes64(db_->handle()) == 0) {
    return NotFound("no job " + std::to_string(job.id) + " in the scheduler database");
  }
  return Status::Ok();
}

StatusOr<JobRecord> JobStore::Get(int64_t id) const {
  Statement& get = *stmts_->get;
  ResetOnExit reset(get);
  get.BindInt(1, id);
  GD_ASSIGN_OR_RETURN(bool row, get.Step());
  if (!row) return NotFound("no job " + std::to_string(id) + " in the scheduler database");
  return job_row::Read(get, db_->path());
}

StatusOr<std::vector<JobRecord>> JobStore::List(bool include_ended) const {
  return ReadAll(include_ended ? *stmts_->list_all : *stmts_->list_not_ended);
}

StatusOr<std::vector<JobRecord>> JobStore::ReadAll(Statement& stmt) const {
  ResetOnExit reset(stmt);
  std::vector<JobRecord> jobs;
  for (;;) {
    GD_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    GD_ASSIGN_OR_RETURN(JobRecord job, job_row::Read(stmt, db_->path()));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

Status JobStore::Begin() {
  if (in_batch_) return FailedPrecondition("a transaction is open already");
  GD_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
  in_batch_ = true;
  return Status::Ok();
}

Status JobStore::Commit() {
  if (!in_batch_) return FailedPrecondition("no transaction is open");
  in_batch_ = false;
  Status s = db_->Exec("COMMIT");
  if (!s.ok()) (void)db_->Exec("ROLLBACK");
  return s;
}

Status JobStore::Flush() {
  if (!in_batch_) return Status::Ok();
  GD_RETURN_IF_ERROR(Commit());
  return Begin();
}

Status JobStore::SetMeta(const std::string& key, const std::string& value) {
  Statement& set = *stmts_->set_meta;
  ResetOnExit reset(set);
  set.BindText(1, key);
  set.BindText(2, value);
  return set.Run();
}

StatusOr<std::optional<std::string>> JobStore::GetMeta(const std::string& key) const {
  Statement& get = *stmts_->get_meta;
  ResetOnExit reset(get);
  get.BindText(1, key);
  GD_ASSIGN_OR_RETURN(bool row, get.Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(get.Text(0));
}

}  // namespace gandiva::sched::live
