#include "sqlite/owned_db.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>

#include "gandiva/common/log.h"

namespace gandiva::sqlite {

namespace {

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
  if (!problems.empty()) return DataLoss(db.name() + " is corrupt (quick_check: " + problems + ")");
  return Status::Ok();
}

// 0: the file is new (no tables yet). Otherwise the schema version of the
// database of `format` it holds, one this build reads. Anything else is an
// error, and the file is left as it was.
StatusOr<int> CheckOwnership(const SqliteDb& db, const OwnedFormat& format) {
  GD_ASSIGN_OR_RETURN(auto tables, QueryText(db, "SELECT count(*) FROM sqlite_master"));
  if (tables && *tables == "0") return 0;
  const std::string not_ours = db.name() + " is not a " + db.label().kind;
  GD_ASSIGN_OR_RETURN(auto has_schema, QueryText(db,
                                                 "SELECT count(*) FROM sqlite_master WHERE "
                                                 "type = 'table' AND name = 'gandiva_schema'"));
  if (!has_schema || *has_schema != "1") return DataLoss(not_ours + " (no gandiva_schema table)");
  GD_ASSIGN_OR_RETURN(auto name,
                      QueryText(db, "SELECT value FROM gandiva_schema WHERE key = 'format'"));
  if (!name || *name != format.format) return DataLoss(not_ours + " (its format row is not ours)");
  GD_ASSIGN_OR_RETURN(auto version, QueryText(db,
                                              "SELECT value FROM gandiva_schema WHERE key = "
                                              "'schema_version'"));
  const int v = version ? std::atoi(version->c_str()) : 0;
  if (v < 1) return DataLoss(not_ours + " (no valid schema_version row)");
  if (v > format.schema_version) {
    return FailedPrecondition(db.name() + " has schema version " + std::to_string(v) +
                              ", written by a newer gandiva; this one reads " +
                              std::to_string(format.schema_version));
  }
  return v;
}

Status SetDurability(SqliteDb& db, const OwnedFormat& format) {
  GD_ASSIGN_OR_RETURN(auto mode, QueryText(db, "PRAGMA journal_mode = WAL"));
  if (!mode || *mode != "wal") {
    return FailedPrecondition(db.name() + ": cannot switch it to WAL mode (journal mode stays " +
                              mode.value_or("unknown") + "; is it on a network filesystem?)");
  }
  return db.Exec(std::string("PRAGMA synchronous = ") + format.synchronous);
}

// IF NOT EXISTS / OR IGNORE: two processes creating the same new file at once
// both succeed, one of them doing the work.
std::string CreationSql(const OwnedFormat& format) {
  return "CREATE TABLE IF NOT EXISTS gandiva_schema (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
         "INSERT OR IGNORE INTO gandiva_schema VALUES ('format', '" +
         format.format + "'), ('schema_version', '" + std::to_string(format.schema_version) +
         "');" + format.schema_sql;
}

// Brings a database written by an older build up to the format's version, in
// one transaction, so that a daemon upgraded in place keeps its state.
Status Upgrade(SqliteDb& db, const OwnedFormat& format, int version) {
  const std::string steps = format.upgrade_sql ? format.upgrade_sql(version) : "";
  const std::string from = "upgrading it from schema version " + std::to_string(version);
  if (steps.empty())
    return FailedPrecondition(db.name() + ": " + from + ": this build cannot upgrade it");
  const std::string sql = steps + "UPDATE gandiva_schema SET value = '" +
                          std::to_string(format.schema_version) + "' WHERE key = 'schema_version';";
  if (Status upgraded = ExecAtomically(db, sql); !upgraded.ok())
    return Status(upgraded.code(), db.name() + ": " + from + ": " + upgraded.message());
  GD_LOG(kInfo, "%s: upgraded from schema version %d to %d", db.name().c_str(), version,
         format.schema_version);
  return Status::Ok();
}

}  // namespace

StatusOr<std::optional<std::string>> QueryText(const SqliteDb& db, const std::string& sql) {
  GD_ASSIGN_OR_RETURN(auto stmt, Statement::Prepare(db, sql));
  GD_ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(stmt->Text(0));
}

Status ExecAtomically(SqliteDb& db, const std::string& sql) {
  GD_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  Status done = db.Exec(sql);
  if (!done.ok()) {
    (void)db.Exec("ROLLBACK");
    return done;
  }
  return db.Exec("COMMIT");
}

StatusOr<std::unique_ptr<SqliteDb>> OpenOwned(const std::string& path, const OwnedFormat& format) {
  GD_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::Open(path, format.label));
  sqlite3_busy_timeout(db->handle(), format.busy_timeout_ms);
  GD_RETURN_IF_ERROR(CheckIntegrity(*db));
  GD_ASSIGN_OR_RETURN(int version, CheckOwnership(*db, format));
  GD_RETURN_IF_ERROR(SetDurability(*db, format));
  if (version == 0) {
    GD_RETURN_IF_ERROR(ExecAtomically(*db, CreationSql(format)));
  } else if (version < format.schema_version) {
    GD_RETURN_IF_ERROR(Upgrade(*db, format, version));
  }
  return db;
}

}  // namespace gandiva::sqlite
