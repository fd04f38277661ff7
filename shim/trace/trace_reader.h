// Reading a trace file written by the recorder (trace_recorder.h): the header, the
// hook names and every record, ordered by start time (each thread's records stay in
// the order it made them). Checks everything before trusting it: a file that is not a
// trace, of another version, or cut mid-record is refused with a clear error; one
// without a kEnd record (its process died) is read, and says so.
#ifndef GANDIVA_SHIM_TRACE_TRACE_READER_H_
#define GANDIVA_SHIM_TRACE_TRACE_READER_H_

#include <string>
#include <vector>

#include "gandiva/status.h"
#include "trace/trace_format.h"

namespace gandiva::shim::trace {

struct Trace {
  TraceHeader header{};
  std::vector<std::string> hook_names;  // by the index records carry
  std::vector<TraceRecord> records;     // kCall and kMark, by start time
  bool complete = false;                // a kEnd record closed it
  TraceRecord end{};                    // valid when complete
  // The hook's name, or "?" for an index outside the table.
  const std::string& HookName(uint16_t hook) const;
};

StatusOr<Trace> ReadTrace(const std::string& path);

// Which record layout a hook has (trace_format.h), from its name: a host-blocking
// sync (the shim's boundary decision in flags, arg[3], arg[4]), or a memory call
// whose arg[4] is the device memory the shim tracks after it.
bool IsSyncHook(const std::string& name);
bool IsTrackedMemoryHook(const std::string& name);

// The symbol a cuGetProcAddress record asked for.
std::string ProcAddressSymbol(const TraceRecord& r);

// One record as a line of text (`gandiva-shim-trace show`).
std::string FormatRecord(const Trace& t, const TraceRecord& r);

}  // namespace gandiva::shim::trace

#endif  // GANDIVA_SHIM_TRACE_TRACE_READER_H_
