// _gandiva: the native half of the `gandiva` Python package (pybind11 over libgandiva):
// the job-side runtime (boundary, stats) and the controller API client.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "gandiva/client.h"
#include "gandiva/gandiva.h"

namespace py = pybind11;

namespace {

py::dict IterationStats() {
  gd_iteration_stats s{};
  gd_get_iteration_stats(&s);
  py::dict d;
  d["iterations"] = s.iterations;
  d["mean_ms"] = s.mean_ms;
  d["ewma_ms"] = s.ewma_ms;
  d["p50_ms"] = s.p50_ms;
  d["p99_ms"] = s.p99_ms;
  d["iterations_per_s"] = s.iterations_per_s;
  d["parks"] = s.parks;
  return d;
}

// Calls the API with JSON text in and out; the Python layer does json.loads
// and turns an error reply into GandivaError. Returns (ok, code, text).
py::tuple Call(gandiva::ApiClient& client, const std::string& type, const std::string& fields_json) {
  auto fields = gandiva::protocol::Json::parse(fields_json, nullptr, false);
  if (fields.is_discarded() || !fields.is_object())
    return py::make_tuple(false, "invalid_argument", "fields must be a JSON object");
  auto t = gandiva::protocol::MessageTypeFromWire(type);
  if (!t) return py::make_tuple(false, "invalid_argument", "unknown request type '" + type + "'");
  gandiva::StatusOr<gandiva::protocol::Json> reply = gandiva::Unavailable("not called");
  {
    py::gil_scoped_release release;  // a call may wait for the daemon
    reply = client.Call(*t, fields);
  }
  if (!reply.ok())
    return py::make_tuple(false, gandiva::StatusCodeName(reply.status().code()), reply.status().message());
  return py::make_tuple(true, "ok", reply->dump());
}

}  // namespace

PYBIND11_MODULE(_gandiva, m) {
  m.doc() = "native part of the gandiva package";
  m.def("attach", [] { return gd_attach() == 1; }, "Attach to the controller; True when managed.");
  // The boundary may park for a whole time slice: let other Python threads run meanwhile.
  m.def("boundary", [] { gd_boundary(); }, py::call_guard<py::gil_scoped_release>());
  m.def("managed", [] { return gd_managed() == 1; });
  m.def("job_id", [] { return gd_job_id(); });
  m.def("iteration_stats", &IterationStats);
  m.def("default_endpoint", &gandiva::DefaultEndpoint);
  py::class_<gandiva::ApiClient>(m, "ApiClient")
      .def(py::init<std::string, int>(), py::arg("endpoint"), py::arg("timeout_ms") = 5000)
      .def("endpoint", &gandiva::ApiClient::endpoint)
      .def("call", &Call)
      // Raw bytes in, raw reply out: for testing how the daemon treats malformed input.
      .def("raw_call", [](gandiva::ApiClient& client, const py::bytes& bytes) {
        auto reply = client.CallRaw(std::string(bytes));
        if (!reply.ok()) throw std::runtime_error(reply.status().ToString());
        return *reply;
      });
}
