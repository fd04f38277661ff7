// See exit_class.h. The patterns are the messages real training jobs die
// with (Python, PyTorch, the CUDA driver, libstdc++), in the order they are
// tried: device errors before the job's own (a CUDA ECC error surfaces as a
// Python RuntimeError), and specific causes before a bare traceback.
#include "live/exit_class.h"

#include <csignal>
#include <string>

namespace gandiva::sched::live {

namespace {

struct OutputPattern {
  std::string_view text;
  FailureClass failure;
  std::string_view cause;
};

constexpr FailureClass kInfra = FailureClass::kInfrastructure;
constexpr FailureClass kUser = FailureClass::kUser;

constexpr OutputPattern kOutputPatterns[] = {
    // The device or its driver failed under the job (Philly's "GPU ECC
    // error", "CUDA init failed"): another device may well run it.
    {"uncorrectable ECC error", kInfra, "device error (ECC)"},
    {"CUDA_ERROR_ECC_UNCORRECTABLE", kInfra, "device error (ECC)"},
    {"GPU has fallen off the bus", kInfra, "device lost"},
    {"CUDA_ERROR_DEVICE_UNAVAILABLE", kInfra, "device unavailable"},
    {"busy or unavailable", kInfra, "device unavailable"},
    {"CUDA error: initialization error", kInfra, "CUDA init failed"},
    {"CUDA_ERROR_SYSTEM_NOT_READY", kInfra, "CUDA init failed"},
    {"unhandled system error", kInfra, "NCCL system error"},
    // The job's own errors: it fails the same way wherever it runs.
    {"SyntaxError", kUser, "syntax error"},
    {"IndentationError", kUser, "syntax error"},
    {"TabError", kUser, "syntax error"},
    {"ModuleNotFoundError", kUser, "import error"},
    {"ImportError", kUser, "import error"},
    {"error: unrecognized arguments", kUser, "argument error"},
    {"error: the following arguments are required", kUser, "argument error"},
    {"error: argument ", kUser, "argument error"},
    // Before "MemoryError", which "OutOfMemoryError" contains.
    {"CUDA out of memory", kUser, "GPU out of memory"},
    {"OutOfMemoryError", kUser, "GPU out of memory"},
    {"CUDA_ERROR_OUT_OF_MEMORY", kUser, "GPU out of memory"},
    {"CUBLAS_STATUS_ALLOC_FAILED", kUser, "GPU out of memory"},
    {"MemoryError", kUser, "CPU out of memory"},
    {"DefaultCPUAllocator", kUser, "CPU out of memory"},
    {"std::bad_alloc", kUser, "CPU out of memory"},
    {"can't allocate memory", kUser, "CPU out of memory"},
    {"Cannot allocate memory", kUser, "CPU out of memory"},
    {"illegal memory access", kUser, "invalid memory access"},
    {"FileNotFoundError", kUser, "incorrect inputs"},
    {"No such file or directory", kUser, "incorrect inputs"},
    {"PermissionError", kUser, "permission error"},
    {"terminate called after throwing", kUser, "uncaught exception"},
};

constexpr std::string_view kTraceback = "Traceback (most recent call last):";

// The exception a Python traceback ends with: the first unindented line after
// the last "Traceback" line, up to its colon ("KeyError" of "KeyError: 'lr'").
std::string TracebackException(std::string_view out) {
  const size_t at = out.rfind(kTraceback);
  if (at == std::string_view::npos) return "";
  size_t line = out.find('\n', at);
  while (line != std::string_view::npos && line + 1 < out.size()) {
    const size_t start = line + 1;
    line = out.find('\n', start);
    const std::string_view text =
        out.substr(start, (line == std::string_view::npos ? out.size() : line) - start);
    if (text.empty() || text[0] == ' ' || text[0] == '\t') continue;
    return std::string(text.substr(0, text.find(':')));
  }
  return "";
}

// A signal that someone sent (an operator, a node's drain, the OOM killer),
// as opposed to one the process raised on itself by crashing.
bool SentFromOutside(int signal) {
  return signal == SIGKILL || signal == SIGTERM || signal == SIGINT || signal == SIGHUP;
}

Classified BySignal(int signal) {
  const std::string n = std::to_string(signal);
  if (SentFromOutside(signal))
    return {FailureClass::kPreempted, "killed by signal " + n + " from outside the scheduler"};
  return {FailureClass::kUser, "crashed with signal " + n};
}

}  // namespace

const char* FailureClassName(FailureClass c) {
  switch (c) {
    case FailureClass::kUser:
      return "user";
    case FailureClass::kInfrastructure:
      return "infrastructure";
    case FailureClass::kPreempted:
      return "preempted";
    case FailureClass::kUnknown:
      return "unknown";
    case FailureClass::kNone:
      break;
  }
  return "";
}

std::optional<FailureClass> ParseFailureClass(std::string_view name) {
  for (FailureClass c : {FailureClass::kNone, FailureClass::kUser, FailureClass::kInfrastructure,
                         FailureClass::kPreempted, FailureClass::kUnknown})
    if (name == FailureClassName(c)) return c;
  return std::nullopt;
}

bool IsRetryable(FailureClass c) {
  return c == FailureClass::kInfrastructure || c == FailureClass::kPreempted;
}

Classified ClassifyRunEnd(const RunEnd& end) {
  if (end.reason == "exited" && end.exit_code == 0) return {};
  for (const OutputPattern& p : kOutputPatterns)
    if (end.output_tail.find(p.text) != std::string::npos) return {p.failure, std::string(p.cause)};
  if (const std::string e = TracebackException(end.output_tail); !e.empty())
    return {FailureClass::kUser, "crashed with " + e};
  if (end.reason == "failed_to_start") return {FailureClass::kUser, "cannot start: " + end.detail};
  // Its exit status never reached its node: gandivad restarted while it ran
  // and was not its parent any more. A node that went down is a failure of
  // its own (the scheduler retries the jobs of a silent node before it is back).
  if (end.reason == "lost") {
    if (end.detached)
      return {FailureClass::kNone,
              "ended on its own, detached cleanly, with no error in its output (its exit status "
              "was lost: " +
                  end.detail + ")"};
    return {FailureClass::kUnknown, "its exit status was lost (" + end.detail +
                                        "); not run again, as it may have finished or still run"};
  }
  if (end.reason == "killed") return BySignal(end.signal);
  // A shell or launcher reports a child killed by signal N as exit code 128+N.
  if (end.exit_code > 128 && end.exit_code < 128 + 65 && SentFromOutside(end.exit_code - 128))
    return BySignal(end.exit_code - 128);
  return {FailureClass::kUser, "exited with code " + std::to_string(end.exit_code)};
}

}  // namespace gandiva::sched::live
