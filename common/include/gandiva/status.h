// Status and StatusOr<T>: how every gandiva module reports an error.
// No exception crosses a module boundary; a function that can fail returns one of these.
#ifndef GANDIVA_STATUS_H_
#define GANDIVA_STATUS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gandiva {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something malformed (bad flag, bad message)
  kNotFound,         // an unknown job, device, file or key
  kAlreadyExists,
  kFailedPrecondition,  // the request does not fit the current state (e.g. resume a running job)
  kUnavailable,         // a peer is not reachable (no daemon running, link broken)
  kDeadlineExceeded,
  kDataLoss,          // corrupt data: bad checksum, truncated stream
  kPermissionDenied,  // authentication refused
  kResourceExhausted,
  kInternal,
  kUnimplemented,
};

// Stable lower-case names used on the wire and in CLI output ("not_found").
const char* StatusCodeName(StatusCode code);
std::optional<StatusCode> StatusCodeFromName(std::string_view name);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "not_found: no job 42"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Internal("StatusOr built from an OK status without a value");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace gandiva

// Returns early from the enclosing function when `expr` is not OK.
#define GD_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::gandiva::Status gd_status_ = (expr);   \
    if (!gd_status_.ok()) return gd_status_; \
  } while (0)

#define GD_CONCAT_INNER_(a, b) a##b
#define GD_CONCAT_(a, b) GD_CONCAT_INNER_(a, b)
// GD_ASSIGN_OR_RETURN(auto x, MaybeX());
#define GD_ASSIGN_OR_RETURN(lhs, expr)                                                  \
  auto GD_CONCAT_(gd_or_, __LINE__) = (expr);                                           \
  if (!GD_CONCAT_(gd_or_, __LINE__).ok()) return GD_CONCAT_(gd_or_, __LINE__).status(); \
  lhs = std::move(GD_CONCAT_(gd_or_, __LINE__)).value()

#endif  // GANDIVA_STATUS_H_
