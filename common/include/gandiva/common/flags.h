// A small command-line flag parser for gandiva's tools: "--name value",
// "--name=value", boolean "--name", positionals, and "--" ending the flags.
// Unknown or malformed flags are errors, never silently ignored.
#ifndef GANDIVA_COMMON_FLAGS_H_
#define GANDIVA_COMMON_FLAGS_H_

#include <limits>
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

// "a,b,,c" -> {"a", "b", "c"}: a flag's comma-separated list.
std::vector<std::string> SplitList(const std::string& s);

// Sets *out from --name when given (else leaves it). The value must be a
// number above `min` (or equal to it, with or_equal); invalid_argument naming
// the flag otherwise.
Status FlagNumber(const Flags& f, const std::string& name, double* out,
                  double min = -std::numeric_limits<double>::infinity(), bool or_equal = true);

// The same for a count (the number is truncated).
template <typename T>
Status FlagCount(const Flags& f, const std::string& name, T* out, double min) {
  double d = static_cast<double>(*out);
  GD_RETURN_IF_ERROR(FlagNumber(f, name, &d, min));
  *out = static_cast<T>(d);
  return Status::Ok();
}

// Sets *out from --name when given, by name among `choices`.
template <typename E>
Status FlagChoice(const Flags& f, const std::string& name, const std::map<std::string, E>& choices,
                  E* out) {
  if (!f.Has(name)) return Status::Ok();
  auto it = choices.find(f.Get(name));
  if (it == choices.end()) return InvalidArgument("unknown --" + name + " '" + f.Get(name) + "'");
  *out = it->second;
  return Status::Ok();
}

}  // namespace gandiva

#endif  // GANDIVA_COMMON_FLAGS_H_
