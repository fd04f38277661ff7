// A database file gandiva owns: marked as ours by a gandiva_schema table (its
// format name and schema version), checked at every open, in WAL mode, created
// with its tables when new and upgraded in place when an older build wrote it.
// A file that is corrupt, not ours or newer than this build is refused with a
// Status naming it, and left as it was.
#ifndef GANDIVA_COMMON_SQLITE_OWNED_DB_H_
#define GANDIVA_COMMON_SQLITE_OWNED_DB_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gandiva/status.h"
#include "sqlite/sqlite_db.h"

namespace gandiva::sqlite {

struct OwnedFormat {
  DbLabel label;
  std::string format;      // the gandiva_schema 'format' row: "gandiva-scheduler"
  int schema_version = 1;  // the layout this build reads and writes
  std::string schema_sql;  // creates a new file's tables (IF NOT EXISTS: two openers may race)
  // SQL that brings a file at version `from` (< schema_version) up to date; none: not upgradable.
  std::function<std::string(int from)> upgrade_sql;
  const char* synchronous = "FULL";  // PRAGMA synchronous: FULL survives power loss
  int busy_timeout_ms = 5000;
};

StatusOr<std::unique_ptr<SqliteDb>> OpenOwned(const std::string& path, const OwnedFormat& format);

// Runs `sql` as one transaction: all of it or none.
Status ExecAtomically(SqliteDb& db, const std::string& sql);
// One text value from a query that returns at most one row.
StatusOr<std::optional<std::string>> QueryText(const SqliteDb& db, const std::string& sql);

}  // namespace gandiva::sqlite

#endif  // GANDIVA_COMMON_SQLITE_OWNED_DB_H_
