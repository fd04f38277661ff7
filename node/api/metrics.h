// gandivad's Prometheus metrics: the figures of list_jobs and list_devices (the
// same records the API serves) in the text exposition format, version 0.0.4.
// Counters are the nodes' running totals (iterations, slices, device time);
// gauges are the current figures (iteration time p50/p99/EWMA, rate against
// alone, state). Ended jobs are left out: their series end with them.
#ifndef GANDIVA_NODE_API_METRICS_H_
#define GANDIVA_NODE_API_METRICS_H_

#include <string>

#include "gandiva/protocol/codec.h"

namespace gandiva::controller {

// `jobs`: list_jobs' reply; `devices`: list_devices'; `node`: the node's name.
std::string RenderMetrics(const std::string& node, const protocol::Json& jobs,
                          const protocol::Json& devices);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_API_METRICS_H_
