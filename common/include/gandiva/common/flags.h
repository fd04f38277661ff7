// A small command-line flag parser for gandiva's tools: "--name value",
// "--name=value", boolean "--name", positionals, and "--" ending the flags.
// Unknown or malformed flags are errors, never silently ignored.
#ifndef GANDIVA_COMMON_FLAGS_H_
#define GANDIVA_COMMON_FLAGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva {

class Flags {
 public:
  // valued: flags that take a value; boolean: flags that do not.
  Flags(std::set<std::string> valued, std::set<std::string> boolean)
      : valued_(std::move(valued)), boolean_(std::move(boolean)) {}

  // Parses args. With stop_at_positional, the first positional word and all
  // after it are positionals (for `run ... CMD ARGS`).
  Status Parse(const std::vector<std::string>& args, bool stop_at_positional = false);

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  StatusOr<long long> GetInt(const std::string& name, long long fallback) const;
  StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::set<std::string> valued_, boolean_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positionals_;
};

}  // namespace gandiva

#endif  // GANDIVA_COMMON_FLAGS_H_
