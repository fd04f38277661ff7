// _gandiva: the native half of the `gandiva` Python package (pybind11 over libgandiva):
// the job-side runtime (boundary, stats), the controller API client, and the wire
// schema's enums and reply validator.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <memory>
#include <utility>

#include "gandiva/checkpoint/registry.h"
#include "gandiva/checkpoint/state_transfer.h"
#include "gandiva/gandiva.h"
#include "gandiva/protocol/client.h"
#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/runtime/job_runtime.h"

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
py::tuple Call(gandiva::ApiClient& client, const std::string& type,
               const std::string& fields_json) {
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
    return py::make_tuple(false, gandiva::StatusCodeName(reply.status().code()),
                          reply.status().message());
  return py::make_tuple(true, "ok", reply->dump());
}

// ---- the wire schema ---------------------------------------------------------

// {"job_state": ["starting", ...], ...}: every enum of messages.def, values in order.
py::dict SchemaEnums() {
  py::dict enums;
  for (const auto& e : gandiva::protocol::AllEnums()) {
    py::list values;
    for (const auto& v : gandiva::protocol::AllEnumValues())
      if (v.enum_type == e.id) values.append(std::string(v.wire));
    enums[py::str(std::string(e.name))] = values;
  }
  return enums;
}

// Checks an ok reply's fields (JSON text) against the schema of `type`'s reply.
// Returns (ok, message); message says what and where when it does not match.
py::tuple ValidateReply(const std::string& type, const std::string& fields_json,
                        bool allow_unknown) {
  auto t = gandiva::protocol::MessageTypeFromWire(type);
  if (!t) return py::make_tuple(false, "unknown request type '" + type + "'");
  auto fields = gandiva::protocol::Json::parse(fields_json, nullptr, false);
  if (fields.is_discarded()) return py::make_tuple(false, "reply is not valid JSON");
  gandiva::Status s =
      gandiva::protocol::ValidateReply(*t, fields,
                                       allow_unknown ? gandiva::protocol::UnknownFields::kAllow
                                                     : gandiva::protocol::UnknownFields::kReject);
  return py::make_tuple(s.ok(), s.message());
}

// The same for a whole reply frame as raw_call returns it, envelope included.
py::tuple ValidateReplyFrame(const std::string& type, const std::string& frame) {
  auto t = gandiva::protocol::MessageTypeFromWire(type);
  if (!t) return py::make_tuple(false, "unknown request type '" + type + "'");
  gandiva::Status s = gandiva::protocol::ValidateReplyFrame(*t, frame);
  return py::make_tuple(s.ok(), s.message());
}

// ---- checkpoint: Python save/load functions as registered state ----------

// The Python callables of one registered state. Save and load run on the
// checkpointing thread, usually inside gd_boundary() with the GIL released,
// so they take the GIL themselves; the last reference may also be dropped
// there, hence the deleter that takes the GIL too.
struct PyState {
  py::object save;
  py::object load;
};

// "ValueError: bad shape", without pybind11's traceback lines.
std::string PyErrorText(const py::error_already_set& e) {
  std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

// Writes one contiguous buffer (bytes, bytearray, a memoryview of a BytesIO or
// of a tensor's memory) in place, with the GIL released.
gandiva::Status WriteBuffer(const py::handle& data, gandiva::checkpoint::SectionWriter& w) {
  Py_buffer view;
  if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    return gandiva::InvalidArgument(
        "save function must return bytes or a contiguous buffer, or a list of them, not " +
        std::string(Py_TYPE(data.ptr())->tp_name));
  }
  gandiva::Status s;
  {
    py::gil_scoped_release nogil;  // the exported buffer cannot be resized meanwhile
    s = w.Write(view.buf, static_cast<size_t>(view.len));
  }
  PyBuffer_Release(&view);
  return s;
}

gandiva::Status SavePyState(const PyState& st, gandiva::checkpoint::SectionWriter& w) {
  py::gil_scoped_acquire gil;
  py::object data;
  try {
    data = st.save();
  } catch (const py::error_already_set& e) {
    return gandiva::Internal("save function raised " + PyErrorText(e));
  }
  // A list or tuple: its buffers written in order, each from where it lies
  // (gandiva.torch hands the model's tensors over this way, uncopied).
  if (py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data)) {
    for (const py::handle piece : data) GD_RETURN_IF_ERROR(WriteBuffer(piece, w));
    return gandiva::Status::Ok();
  }
  return WriteBuffer(data, w);
}

gandiva::Status LoadPyState(const PyState& st, gandiva::checkpoint::SectionReader& r) {
  py::gil_scoped_acquire gil;
  auto data = py::reinterpret_steal<py::bytes>(
      PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(r.size())));
  if (!data) {
    PyErr_Clear();
    return gandiva::ResourceExhausted("no memory for a " + std::to_string(r.size()) +
                                      "-byte section");
  }
  {
    py::gil_scoped_release nogil;  // nobody else sees `data` yet
    r.Read(PyBytes_AS_STRING(data.ptr()), r.size());
  }
  try {
    st.load(data);
  } catch (const py::error_already_set& e) {
    return gandiva::Internal("load function raised " + PyErrorText(e));
  }
  return gandiva::Status::Ok();
}

// A registration's failure as Python says it: a taken name is a KeyError,
// anything else (a bad name, no memory) a ValueError.
void RaiseIfNotRegistered(const gandiva::Status& s) {
  if (s.code() == gandiva::StatusCode::kAlreadyExists) throw py::key_error(s.message());
  if (!s.ok()) throw py::value_error(s.message());
}

void RegisterState(const std::string& name, py::function save, py::function load) {
  std::shared_ptr<PyState> st(new PyState{std::move(save), std::move(load)}, [](PyState* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
  gandiva::Status s = gandiva::checkpoint::RegisterState(
      name, [st](gandiva::checkpoint::SectionWriter& w) { return SavePyState(*st, w); },
      [st](gandiva::checkpoint::SectionReader& r) { return LoadPyState(*st, r); });
  RaiseIfNotRegistered(s);
}

// A Python object's writable, C-contiguous memory (a bytearray, a NumPy
// array, a CPU tensor's .numpy()) as a buffer section. The object stays
// exported until the section is gone, so a bytearray cannot be resized under
// it; the runtime reads and writes the bytes without the GIL.
void RegisterBuffer(const std::string& name, const py::object& obj) {
  Py_buffer raw;
  if (PyObject_GetBuffer(obj.ptr(), &raw, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0)
    throw py::error_already_set();
  std::shared_ptr<Py_buffer> view(new Py_buffer(raw), [](Py_buffer* v) {
    py::gil_scoped_acquire gil;
    PyBuffer_Release(v);
    delete v;
  });
  gandiva::Status s =
      gandiva::checkpoint::RegisterBuffer(name, view->buf, static_cast<size_t>(view->len), view);
  RaiseIfNotRegistered(s);
}

void UnregisterState(const std::string& name) {
  gandiva::Status s;
  {
    // The registry's entry may drop the last reference: its deleter takes the GIL.
    py::gil_scoped_release nogil;
    s = gandiva::checkpoint::UnregisterState(name);
  }
  if (!s.ok()) throw py::key_error(s.message());
}

// Writes DIR/state.gdck now. Returns (ok, code, message, bytes).
py::tuple Checkpoint(const std::string& dir) {
  uint64_t bytes = 0;
  gandiva::Status s;
  {
    py::gil_scoped_release nogil;  // save functions take it back
    s = gandiva::checkpoint::SaveState(
        "file:" + dir + "/" + gandiva::checkpoint::kCheckpointFileName, gd_job_id(), &bytes);
  }
  return py::make_tuple(s.ok(), gandiva::StatusCodeName(s.code()), s.message(), bytes);
}

// Loads a stream now (tests; GANDIVA_RESTORE does it at the first boundary).
py::tuple Restore(const std::string& target) {
  uint64_t bytes = 0;
  gandiva::Status s;
  {
    py::gil_scoped_release nogil;
    s = gandiva::checkpoint::RestoreState(target, &bytes);
  }
  return py::make_tuple(s.ok(), gandiva::StatusCodeName(s.code()), s.message(), bytes);
}

// True when the controller asked this job to park at its next boundary and to swap
// its device memory out there: a framework can release its cached free memory now,
// before the boundary, so that the shim moves only live allocations. Read before
// the boundary, not inside the park: a framework's allocator takes locks that a
// thread gated inside the park may hold.
bool SwapOutPending() {
  gandiva::runtime::JobRuntime& rt = gandiva::runtime::JobRuntime::Get();
  const gandiva::runtime::ControlBlock* cb = rt.control_block();
  return rt.managed() &&
         cb->request.load(std::memory_order_acquire) != gandiva::runtime::kRequestRun &&
         cb->swap_request.load(std::memory_order_acquire) == gandiva::runtime::kSwapOut &&
         cb->swap_state.load(std::memory_order_acquire) != gandiva::runtime::kSwapSwappedOut;
}

// Set by the first boundary the script marks itself (gandiva.step(), an attached
// optimizer or loader): from then on the automatic hook's marks are dropped.
std::atomic<bool> g_explicit_marks{false};

}  // namespace

PYBIND11_MODULE(_gandiva, m) {
  m.doc() = "native part of the gandiva package";
  m.def(
      "attach", [] { return gd_attach() == 1; }, "Attach to the controller; True when managed.");
  // The boundary may park for a whole time slice: let other Python threads run meanwhile.
  m.def(
      "boundary",
      [] {
        g_explicit_marks.store(true, std::memory_order_relaxed);
        gd_boundary();
      },
      py::call_guard<py::gil_scoped_release>());
  // The automatic hook's boundary (gandiva/_autotorch.py): marked only while the
  // script marks none itself, so that a script that does is not counted twice.
  // Returns whether it marked one.
  m.def(
      "auto_boundary",
      [] {
        if (g_explicit_marks.load(std::memory_order_relaxed)) return false;
        gd_boundary();
        return true;
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("explicit_boundaries", [] { return g_explicit_marks.load(std::memory_order_relaxed); });
  m.def("managed", [] { return gd_managed() == 1; });
  m.def("swap_out_pending", &SwapOutPending);
  m.def("job_id", [] { return gd_job_id(); });
  m.def("iteration_stats", &IterationStats);
  m.def("default_endpoint", &gandiva::DefaultEndpoint);
  m.def("default_scheduler_endpoint", &gandiva::DefaultSchedulerEndpoint);
  m.def("register_state", &RegisterState, py::arg("name"), py::arg("save"), py::arg("load"));
  m.def("register_buffer", &RegisterBuffer, py::arg("name"), py::arg("buffer"));
  m.def("unregister_state", &UnregisterState, py::arg("name"));
  m.def("registered_states", [] { return gandiva::checkpoint::StateRegistry::Global().Names(); });
  m.def("checkpoint", &Checkpoint, py::arg("dir"));
  m.def("restore", &Restore, py::arg("target"));
  m.def("protocol_version", [] { return gandiva::protocol::kProtocolVersion; });
  m.def("message_types", [] {
    py::list names;
    for (const auto& msg : gandiva::protocol::AllMessages())
      names.append(std::string(msg.wire_name));
    return names;
  });
  m.def("schema_enums", &SchemaEnums);
  m.def("validate_reply", &ValidateReply, py::arg("type"), py::arg("fields_json"),
        py::arg("allow_unknown") = false);
  m.def("validate_reply_frame", &ValidateReplyFrame, py::arg("type"), py::arg("frame"));
  py::class_<gandiva::ApiClient>(m, "ApiClient")
      .def(py::init<std::string, int>(), py::arg("endpoint"), py::arg("timeout_ms") = 5000)
      .def("endpoint", &gandiva::ApiClient::endpoint)
      .def("call", &Call)
      // CURVE for a tcp:// endpoint: this client's key pair file and the
      // server's public key (or a file holding it), as the CLI's --key/--server-key.
      .def(
          "use_curve",
          [](gandiva::ApiClient& client, const std::string& key_file,
             const std::string& server_key) {
            auto keys = gandiva::protocol::ReadCurveClientKeys(key_file, server_key);
            if (!keys.ok()) throw py::value_error(keys.status().message());
            client.SetCurve(std::move(keys).value());
          },
          py::arg("key_file"), py::arg("server_key"))
      // Raw bytes in, raw reply out: for testing how the daemon treats malformed input.
      .def(
          "raw_call",
          [](gandiva::ApiClient& client, const py::bytes& bytes) {
            const std::string request(bytes);
            gandiva::StatusOr<std::string> reply = gandiva::Unavailable("not called");
            {
              py::gil_scoped_release release;  // a call may wait for the daemon
              reply = client.CallRaw(request);
            }
            if (!reply.ok()) throw std::runtime_error(reply.status().ToString());
            return *reply;
          },
          py::arg("bytes"));
}
