// A thin RAII layer over the SQLite C API for gandiva's durable state (the
// scheduler's job store, gandivad's job table): one connection (SqliteDb) and
// its prepared statements (Statement), with every SQLite result code turned
// into a Status whose message names the database and its file.
// Not thread-safe: a connection and its statements belong to one thread.
#ifndef GANDIVA_COMMON_SQLITE_SQLITE_DB_H_
#define GANDIVA_COMMON_SQLITE_SQLITE_DB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gandiva/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gandiva::sqlite {

// How errors name a database: "<what> <path>: ...", and what a file that is
// not one is not ("... is corrupt or not a <kind>").
struct DbLabel {
  std::string what;  // "scheduler database"
  std::string kind;  // "gandiva scheduler database"
};

class SqliteDb {
 public:
  // Opens (creating when absent) the database file at `path`; no pragmas yet.
  static StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path, DbLabel label);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  const DbLabel& label() const { return label_; }
  // "<what> <path>", the start of every message about this database.
  std::string name() const { return label_.what + " " + path_; }
  // Runs SQL that returns no rows (one or more statements separated by ';').
  Status Exec(const std::string& sql);
  // The Status for SQLite result code `rc` while doing `what`, with SQLite's own
  // message and the file's path: corrupt or not-a-database is data_loss.
  Status Error(int rc, std::string_view what) const;

 private:
  SqliteDb(sqlite3* db, std::string path, DbLabel label)
      : db_(db), path_(std::move(path)), label_(std::move(label)) {}
  sqlite3* db_;
  std::string path_;
  DbLabel label_;
};

// A prepared statement. Bind parameters (1-based), Step through the rows, read
// columns (0-based); Reset before the next use (Step's caller does it, or the
// ResetOnExit guard), which also ends the statement's read transaction.
class Statement {
 public:
  static StatusOr<std::unique_ptr<Statement>> Prepare(const SqliteDb& db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binding errors (only a bad index or an oversized value) are kept and
  // returned by the next Step.
  void BindInt(int index, int64_t value);
  void BindDouble(int index, double value);
  void BindText(int index, std::string_view value);
  // true: a row is ready; false: done.
  StatusOr<bool> Step();
  // Steps a statement that returns no rows.
  Status Run();
  void Reset();

  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;  // byte-exact, NULs included

 private:
  Statement(const SqliteDb& db, sqlite3_stmt* stmt, std::string sql)
      : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  void NoteBind(int rc, int index);
  const SqliteDb& db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
  int bind_error_ = 0;  // first failed bind's result code
  int bind_error_index_ = 0;
};

// Resets a statement when the scope ends, on every return path.
class ResetOnExit {
 public:
  explicit ResetOnExit(Statement& stmt) : stmt_(stmt) {}
  ~ResetOnExit() { stmt_.Reset(); }
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;

 private:
  Statement& stmt_;
};

}  // namespace gandiva::sqlite

#endif  // GANDIVA_COMMON_SQLITE_SQLITE_DB_H_
