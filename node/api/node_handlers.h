// The API handlers of the node's jobs and devices (hello, list_jobs,
// register_job, suspend, set_slice, ...): the wire boundary, where requests'
// fields become calls on the Node and its components, and records, states and
// kinds become reply fields with their wire names. Each answers at once.
#ifndef GANDIVA_NODE_API_NODE_HANDLERS_H_
#define GANDIVA_NODE_API_NODE_HANDLERS_H_

#include <optional>

#include "devices/device_loop.h"
#include "gandiva/protocol/dispatcher.h"
#include "jobs/job.h"
#include "migration/operation.h"

namespace gandiva::controller {

using protocol::Dispatcher;
using protocol::Json;

class Node;
struct NewJob;

void RegisterNodeHandlers(Dispatcher& dispatcher, Node& node);
// launch and read_log (launch_handlers.cc).
void RegisterLaunchHandlers(Dispatcher& dispatcher, Node& node);

// list_jobs' record of one job.
Json JobToJson(const Job& job, bool held, const DeviceUsage& usage,
               const std::optional<Operation>& operation);
Json OperationToJson(const std::optional<Operation>& op);
Json DeviceToJson(const DeviceSnapshot& device);
// A register_job or launch request's "ranks" (default 1), checked against kMaxRanks.
StatusOr<uint32_t> RanksFromRequest(const Json& req);
// A register_job or launch request's device choice into `job`: "device" (one),
// or "devices" (the job spans them all); not both.
Status DevicesFromRequest(const Json& req, NewJob& job);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_API_NODE_HANDLERS_H_
