// Flag parsing; see flags.h.
#include "gandiva/common/flags.h"

#include <charconv>
#include <cstdlib>
#include <sstream>

namespace gandiva {

Status Flags::Parse(const std::vector<std::string>& args, bool stop_at_positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      positionals_.insert(positionals_.end(), args.begin() + i + 1, args.end());
      return Status::Ok();
    }
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string name = a.substr(2), value;
      bool has_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      if (boolean_.count(name)) {
        if (has_value) return InvalidArgument("flag --" + name + " takes no value");
        values_[name] = "true";
      } else if (valued_.count(name)) {
        if (!has_value) {
          if (i + 1 >= args.size()) return InvalidArgument("flag --" + name + " needs a value");
          value = args[++i];
        }
        values_[name] = value;
      } else {
        return InvalidArgument("unknown flag --" + name);
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-' && a != "-") return InvalidArgument("unknown flag " + a);
    if (stop_at_positional) {
      positionals_.insert(positionals_.end(), args.begin() + i, args.end());
      return Status::Ok();
    }
    positionals_.push_back(a);
  }
  return Status::Ok();
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

StatusOr<long long> Flags::GetInt(const std::string& name, long long fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  long long v = 0;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    return InvalidArgument("--" + name + " needs an integer, not '" + s + "'");
  return v;
}

StatusOr<double> Flags::GetDouble(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0')
    return InvalidArgument("--" + name + " needs a number, not '" + it->second + "'");
  return v;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

Status FlagNumber(const Flags& f, const std::string& name, double* out, double min, bool or_equal) {
  if (!f.Has(name)) return Status::Ok();
  GD_ASSIGN_OR_RETURN(double v, f.GetDouble(name, *out));
  if (v < min || (!or_equal && v == min)) {
    std::ostringstream bound;
    bound << (or_equal ? ">= " : "> ") << min;
    return InvalidArgument("--" + name + " must be " + bound.str() + ", not '" + f.Get(name) + "'");
  }
  *out = v;
  return Status::Ok();
}

}  // namespace gandiva
