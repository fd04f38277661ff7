// Readers for the Alibaba GPU-sharing trace of 2023 (alibaba/clusterdata
// cluster-trace-gpu-v2023, "openb"): its task list and its GPU node list.
// A task asks for num_gpu whole GPUs, or for gpu_milli thousandths of one GPU,
// plus CPU and memory; nodes have CPU, memory and a number of GPUs.
#ifndef GANDIVA_SRC_SCHED_ALIBABA_TRACE_H_
#define GANDIVA_SRC_SCHED_ALIBABA_TRACE_H_

#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::sched {

struct AlibabaTask {
  std::string name;
  long cpu_milli = 0;
  long memory_mib = 0;
  int num_gpu = 0;       // 0: CPU only
  int gpu_milli = 0;     // per GPU, 1..1000; < 1000 only with num_gpu 1 (a share of one GPU)
  std::string gpu_spec;  // required GPU model(s); empty: any
  double creation_time = 0;
  double deletion_time = 0;
};

struct AlibabaNode {
  std::string name;
  long cpu_milli = 0;
  long memory_mib = 0;
  int gpus = 0;
  std::string model;
};

// Errors: not_found (cannot open), invalid_argument ("FILE:LINE: why"; a missing
// column is reported against the header line).
StatusOr<std::vector<AlibabaTask>> ReadAlibabaTasks(const std::string& path);
StatusOr<std::vector<AlibabaNode>> ReadAlibabaNodes(const std::string& path);
// The same, from text in memory (`name` is used in error messages).
StatusOr<std::vector<AlibabaTask>> ParseAlibabaTasks(const std::string& text,
                                                     const std::string& name);
StatusOr<std::vector<AlibabaNode>> ParseAlibabaNodes(const std::string& text,
                                                     const std::string& name);

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_ALIBABA_TRACE_H_
