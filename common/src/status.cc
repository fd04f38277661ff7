// Names of status codes, shared by the wire protocol and the CLI.
#include "gandiva/status.h"

#include <array>

namespace gandiva {
namespace {
constexpr std::array<const char*, 12> kNames = {
    "ok",          "invalid_argument",  "not_found", "already_exists",    "failed_precondition",
    "unavailable", "deadline_exceeded", "data_loss", "permission_denied", "resource_exhausted",
    "internal",    "unimplemented"};
}  // namespace

const char* StatusCodeName(StatusCode code) {
  auto i = static_cast<size_t>(code);
  return i < kNames.size() ? kNames[i] : "unknown";
}

std::optional<StatusCode> StatusCodeFromName(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (name == kNames[i]) return static_cast<StatusCode>(i);
  return std::nullopt;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace gandiva
