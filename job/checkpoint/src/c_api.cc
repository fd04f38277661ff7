// The checkpoint part of the C API (gandiva.h): state registration, section
// writers and readers. gd_checkpoint is the runtime's (runtime/src/c_api.cc):
// the stream records the job id, which only the runtime knows.
#include <cstring>
#include <new>

#include "gandiva/checkpoint/registry.h"
#include "gandiva/common/log.h"
#include "gandiva/gandiva.h"

using gandiva::Status;
using gandiva::checkpoint::SectionReader;
using gandiva::checkpoint::SectionWriter;

// The opaque handles of the C API wrap the C++ interfaces.
struct gd_writer {
  SectionWriter* impl;
};
struct gd_reader {
  SectionReader* impl;
};

extern "C" {

int gd_register_state(const char* name, gd_save_fn save, gd_load_fn load, void* user) {
  if (!name || !save || !load) return -1;
  Status s = gandiva::checkpoint::RegisterState(
      name,
      [save, user, n = std::string(name)](SectionWriter& w) {
        gd_writer cw{&w};
        const int rc = save(user, &cw);
        return rc == 0 ? Status::Ok()
                       : gandiva::Internal("save function returned " + std::to_string(rc));
      },
      [load, user](SectionReader& r) {
        gd_reader cr{&r};
        const int rc = load(user, &cr);
        return rc == 0 ? Status::Ok()
                       : gandiva::Internal("load function returned " + std::to_string(rc));
      });
  if (!s.ok()) {
    GD_LOG(kWarn, "gd_register_state: %s", s.ToString().c_str());
    return -1;
  }
  return 0;
}

int gd_register_buffer(const char* name, void* data, size_t size) {
  if (!name) return -1;
  Status s = gandiva::checkpoint::RegisterBuffer(name, data, size);
  if (!s.ok()) {
    GD_LOG(kWarn, "gd_register_buffer: %s", s.ToString().c_str());
    return -1;
  }
  return 0;
}

int gd_unregister_state(const char* name) {
  if (!name) return -1;
  return gandiva::checkpoint::UnregisterState(name).ok() ? 0 : -1;
}

int gd_write(gd_writer* w, const void* data, size_t n) {
  if (!w || (!data && n)) return -1;
  return w->impl->Write(data, n).ok() ? 0 : -1;
}

long long gd_read(gd_reader* r, void* out, size_t n) {
  if (!r || (!out && n)) return -1;
  return static_cast<long long>(r->impl->Read(out, n));
}

long long gd_section_size(gd_reader* r) { return r ? static_cast<long long>(r->impl->size()) : -1; }

}  // extern "C"
