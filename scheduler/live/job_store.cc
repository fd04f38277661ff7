#include "live/job_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>

#include "gandiva/common/log.h"
#include "live/job_row.h"
#include "live/sqlite_db.h"

namespace gandiva::sched::live {

namespace {

constexpr std::array<std::pair<LiveJobState, const char*>, 7> kStateNames{{
    {LiveJobState::kQueued, "queued"},
    {LiveJobState::kStarting, "starting"},
    {LiveJobState::kRunning, "running"},
    {LiveJobState::kSuspended, "suspended"},
    {LiveJobState::kFinished, "finished"},
    {LiveJobState::kFailed, "failed"},
    {LiveJobState::kCancelled, "cancelled"},
}};

// What marks a file as ours, and the layout this build reads and writes. A
// change to the tables bumps kSchemaVersion (and needs a migration here).
constexpr const char* kFormat = "gandiva-scheduler";
// Version 2 added jobs.kind.
constexpr int kSchemaVersion = 2;
constexpr int kBusyTimeoutMs = 5000;

// IF NOT EXISTS / OR IGNORE: two processes creating the same new file at once
// both succeed, one of them doing the work.
std::string SchemaSql() {
  return std::string(
             "CREATE TABLE IF NOT EXISTS gandiva_schema (key TEXT PRIMARY KEY, value TEXT NOT "
             "NULL);"
             "INSERT OR IGNORE INTO gandiva_schema VALUES ('format', '") +
         kFormat + "'), ('schema_version', '" + std::to_string(kSchemaVersion) +
         "');"
         // AUTOINCREMENT: an id is never handed out twice, even if rows are deleted one day.
         "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,"
         " name TEXT NOT NULL, user TEXT NOT NULL, vc TEXT NOT NULL, gpus INTEGER NOT NULL,"
         " ranks INTEGER NOT NULL, command TEXT NOT NULL, cwd TEXT NOT NULL, env TEXT NOT NULL,"
         " restartable INTEGER NOT NULL, submit_time REAL NOT NULL, state TEXT NOT NULL,"
         " attempt INTEGER NOT NULL, node TEXT NOT NULL, device TEXT NOT NULL,"
         " node_job INTEGER NOT NULL, checkpoint_dir TEXT NOT NULL, checkpoint_time REAL NOT NULL,"
         " start_time REAL NOT NULL, end_time REAL NOT NULL, attained REAL NOT NULL,"
         " run_time REAL NOT NULL, exit_code INTEGER NOT NULL, detail TEXT NOT NULL,"
         " cancel_requested INTEGER NOT NULL, ended INTEGER NOT NULL, kind TEXT NOT NULL);"
         // List(false) walks only the jobs that have not ended, in id order.
         "CREATE INDEX IF NOT EXISTS jobs_not_ended ON jobs(id) WHERE ended = 0;"
         "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";
}

// PRAGMA quick_check: "ok", or rows naming what is wrong. Preparing it reads
// the file's header and schema, which is where a file that is not a database fails.
Status CheckIntegrity(const SqliteDb& db) {
  GD_ASSIGN_OR_RETURN(auto check, Statement::Prepare(db, "PRAGMA quick_check(3)"));
  std::string problems;
  for (;;) {
    GD_ASSIGN_OR_RETURN(bool row, check->Step());
    if (!row) break;
    std::string line = check->Text(0);
    std::replace(line.begin(), line.end(), '\n', ' ');  // one line in logs and CLI output
    if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
  }
  if (!problems.empty()) {
    return DataLoss("scheduler database " + db.path() + " is corrupt (quick_check: " + problems +
                    ")");
  }
  return Status::Ok();
}

// One text value from a query that returns at most one row.
StatusOr<std::optional<std::string>> QueryText(const SqliteDb& db, const std::string& sql) {
  GD_ASSIGN_OR_RETURN(auto stmt, Statement::Prepare(db, sql));
  GD_ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(stmt->Text(0));
}

// 0: the file is new (no tables yet). Otherwise the schema version of the
// gandiva scheduler database it holds, one this build reads. Anything else is
// an error, and the file is left as it was.
StatusOr<int> CheckOwnership(const SqliteDb& db) {
  GD_ASSIGN_OR_RETURN(auto tables, QueryText(db, "SELECT count(*) FROM sqlite_master"));
  if (tables && *tables == "0") return 0;
  const std::string not_ours =
      "scheduler database " + db.path() + " is not a gandiva scheduler database";
  GD_ASSIGN_OR_RETURN(auto has_schema, QueryText(db,
                                                 "SELECT count(*) FROM sqlite_master WHERE "
                                                 "type = 'table' AND name = 'gandiva_schema'"));
  if (!has_schema || *has_schema != "1") return DataLoss(not_ours + " (no gandiva_schema table)");
  GD_ASSIGN_OR_RETURN(auto format,
                      QueryText(db, "SELECT value FROM gandiva_schema WHERE key = 'format'"));
  if (!format || *format != kFormat) return DataLoss(not_ours + " (its format row is not ours)");
  GD_ASSIGN_OR_RETURN(auto version, QueryText(db,
                                              "SELECT value FROM gandiva_schema WHERE key = "
                                              "'schema_version'"));
  int v = version ? std::atoi(version->c_str()) : 0;
  if (v < 1) return DataLoss(not_ours + " (no valid schema_version row)");
  if (v > kSchemaVersion) {
    return FailedPrecondition("scheduler database " + db.path() + " has schema version " +
                              std::to_string(v) + ", written by a newer gandiva; this one reads " +
                              std::to_string(kSchemaVersion));
  }
  return v;
}

Status SetDurability(SqliteDb& db) {
  GD_ASSIGN_OR_RETURN(auto mode, QueryText(db, "PRAGMA journal_mode = WAL"));
  if (!mode || *mode != "wal") {
    return FailedPrecondition("scheduler database " + db.path() +
                              ": cannot switch it to WAL mode (journal mode stays " +
                              mode.value_or("unknown") + "; is it on a network filesystem?)");
  }
  return db.Exec("PRAGMA synchronous = FULL");
}

// Runs `sql` as one transaction: all of it or none.
Status ExecAtomically(SqliteDb& db, const std::string& sql) {
  GD_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  Status done = db.Exec(sql);
  if (!done.ok()) {
    (void)db.Exec("ROLLBACK");
    return done;
  }
  return db.Exec("COMMIT");
}

// Brings a database written by an older build up to kSchemaVersion, in one
// transaction, so that a scheduler upgraded in place keeps its queue.
Status Upgrade(SqliteDb& db, int version) {
  std::string sql;
  if (version < 2) sql += "ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT '';";
  sql += "UPDATE gandiva_schema SET value = '" + std::to_string(kSchemaVersion) +
         "' WHERE key = 'schema_version';";
  Status upgraded = ExecAtomically(db, sql);
  if (!upgraded.ok()) {
    return Status(upgraded.code(), "scheduler database " + db.path() +
                                       ": upgrading it from schema version " +
                                       std::to_string(version) + ": " + upgraded.message());
  }
  GD_LOG(kInfo, "scheduler database %s: upgraded from schema version %d to %d", db.path().c_str(),
         version, kSchemaVersion);
  return Status::Ok();
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

struct JobStore::Statements {
  std::unique_ptr<Statement> insert, update, get, list_all, list_not_ended, set_meta, get_meta;

  static StatusOr<std::unique_ptr<Statements>> Prepare(const SqliteDb& db) {
    const std::string columns = job_row::kColumnList;
    const std::string select = "SELECT id, " + columns + " FROM jobs ";
    std::string params, assignments;
    for (int i = 1; i <= job_row::kColumnCount; ++i) params += (i > 1 ? ", ?" : "?");
    // "name = ?1, user = ?2, ..." from the same column list.
    size_t start = 0;
    for (int i = 1; i <= job_row::kColumnCount; ++i) {
      size_t end = columns.find(',', start);
      assignments +=
          (i > 1 ? ", " : "") + columns.substr(start, end - start) + " = ?" + std::to_string(i);
      start = end == std::string::npos ? end : columns.find_first_not_of(' ', end + 1);
    }
    auto s = std::make_unique<Statements>();
    GD_ASSIGN_OR_RETURN(s->insert, Statement::Prepare(db, "INSERT INTO jobs (" + columns +
                                                              ") VALUES (" + params + ")"));
    GD_ASSIGN_OR_RETURN(s->update,
                        Statement::Prepare(db, "UPDATE jobs SET " + assignments + " WHERE id = ?" +
                                                   std::to_string(job_row::kColumnCount + 1)));
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
  GD_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::Open(path));
  sqlite3_busy_timeout(db->handle(), kBusyTimeoutMs);
  GD_RETURN_IF_ERROR(CheckIntegrity(*db));
  GD_ASSIGN_OR_RETURN(int version, CheckOwnership(*db));
  GD_RETURN_IF_ERROR(SetDurability(*db));
  if (version == 0) {
    GD_RETURN_IF_ERROR(ExecAtomically(*db, SchemaSql()));
  } else if (version < kSchemaVersion) {
    GD_RETURN_IF_ERROR(Upgrade(*db, version));
  }
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
