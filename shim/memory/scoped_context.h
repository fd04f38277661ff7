// Makes a CUDA context current for a scope, through the real driver: the thread
// that swaps or checkpoints (the boundary thread) may have none current, or another.
#ifndef GANDIVA_SHIM_SCOPED_CONTEXT_H_
#define GANDIVA_SHIM_SCOPED_CONTEXT_H_

#include "interpose/driver.h"

namespace gandiva::shim {

class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx)
      : pushed_(ctx && Extras().cuCtxPushCurrent &&
                Extras().cuCtxPushCurrent(ctx) == CUDA_SUCCESS) {}
  ~ScopedContext() {
    CUcontext ignored;
    if (pushed_) Extras().cuCtxPopCurrent(&ignored);
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_;
};

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_SCOPED_CONTEXT_H_
