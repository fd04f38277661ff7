#include "sqlite/sqlite_db.h"

#include <sqlite3.h>

#include <utility>

namespace gandiva::sqlite {

StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path, DbLabel label) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  // Even a failed open may allocate a handle (for its error message): wrap it so
  // it is closed on every path.
  std::unique_ptr<SqliteDb> out(new SqliteDb(db, path, std::move(label)));
  if (db == nullptr) return Internal(out->name() + ": out of memory opening it");
  if (rc != SQLITE_OK) return out->Error(rc, "cannot open it");
  return out;
}

SqliteDb::~SqliteDb() {
  // Statements are finalized by their owners first; close_v2 defers the close
  // until they are, rather than failing.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Status SqliteDb::Exec(const std::string& sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  if (message != nullptr) sqlite3_free(message);
  if (rc != SQLITE_OK) return Error(rc, "running \"" + sql.substr(0, 60) + "\"");
  return Status::Ok();
}

Status SqliteDb::Error(int rc, std::string_view what) const {
  const std::string sqlite_says = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string message = name() + ": " + std::string(what) + ": " + sqlite_says;
  switch (rc & 0xff) {  // the primary code of an extended one
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLoss(name() + " is corrupt or not a " + label_.kind + ": " + sqlite_says + " (" +
                      std::string(what) + ")");
    case SQLITE_FULL:
      return ResourceExhausted(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable(message + " (another process holds it locked)");
    case SQLITE_CANTOPEN:
      return Unavailable(message);
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return PermissionDenied(message);
    case SQLITE_CONSTRAINT:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
      return InvalidArgument(message);
    default:
      return Internal(message);
  }
}

StatusOr<std::unique_ptr<Statement>> Statement::Prepare(const SqliteDb& db,
                                                        const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc =
      sqlite3_prepare_v3(db.handle(), sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return db.Error(rc, "preparing \"" + sql.substr(0, 60) + "\"");
  }
  return std::unique_ptr<Statement>(new Statement(db, stmt, sql));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::NoteBind(int rc, int index) {
  if (rc != SQLITE_OK && bind_error_ == 0) {
    bind_error_ = rc;
    bind_error_index_ = index;
  }
}

void Statement::BindInt(int index, int64_t value) {
  NoteBind(sqlite3_bind_int64(stmt_, index, value), index);
}

void Statement::BindDouble(int index, double value) {
  NoteBind(sqlite3_bind_double(stmt_, index, value), index);
}

void Statement::BindText(int index, std::string_view value) {
  // SQLITE_TRANSIENT copies: the caller's strings need not outlive the step.
  NoteBind(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
}

StatusOr<bool> Statement::Step() {
  if (bind_error_ != 0) {
    return db_.Error(bind_error_, "binding parameter " + std::to_string(bind_error_index_) +
                                      " of \"" + sql_.substr(0, 60) + "\"");
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_.Error(rc, "running \"" + sql_.substr(0, 60) + "\"");
}

Status Statement::Run() {
  GD_ASSIGN_OR_RETURN(bool row, Step());
  (void)row;
  return Status::Ok();
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = 0;
  bind_error_index_ = 0;
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  int bytes = sqlite3_column_bytes(stmt_, column);  // after column_text, as SQLite asks
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(bytes));
}

}  // namespace gandiva::sqlite
