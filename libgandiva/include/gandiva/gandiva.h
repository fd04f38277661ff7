/* gandiva.h — the job-side C API of gandiva.
 *
 * A training program calls gd_boundary() once per iteration (e.g. after each
 * optimizer step). When the program runs under `gandiva run`, the node
 * controller (gandivad) can then suspend it exactly at an iteration boundary,
 * time-slice it with other jobs and read its iteration times. Run without a
 * controller, every call is cheap and changes nothing (the job is "unmanaged").
 *
 * A C API so that any framework or language can call it; gandiva.hpp wraps it
 * for C++. All functions are thread-safe except as noted. No function throws.
 */
#ifndef GANDIVA_GANDIVA_H_
#define GANDIVA_GANDIVA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GD_API __attribute__((visibility("default")))
#else
#define GD_API
#endif

/* Attaches to the controller named by the environment `gandiva run` sets
 * (GANDIVA_CONTROL_BLOCK, GANDIVA_JOB_ID). Idempotent; gd_boundary() attaches
 * on first use, so calling this is optional. Returns 1 when managed by a
 * controller, 0 when running unmanaged (no controller; said once on stderr). */
GD_API int gd_attach(void);

/* Marks an iteration boundary. Records the time since the previous boundary
 * (time spent parked excluded) and, if the controller asked the job to
 * suspend, parks here until resumed. Call from the training thread only.
 * When nothing is requested: no lock, no syscall, no allocation. */
GD_API void gd_boundary(void);

/* 1 while a controller manages this job, 0 when unmanaged (never attached, or
 * the controller went away and the job resumed itself). */
GD_API int gd_managed(void);

/* The job id the controller gave this job; 0 when unmanaged. */
GD_API uint64_t gd_job_id(void);

typedef struct gd_iteration_stats {
  uint64_t iterations;      /* measured iterations so far */
  double mean_ms;           /* mean iteration time over all iterations */
  double ewma_ms;           /* exponentially weighted moving average (alpha 1/8) */
  double p50_ms;            /* median over the last 1024 iterations */
  double p99_ms;            /* 99th percentile over the last 1024 iterations */
  double iterations_per_s;  /* current rate, from the EWMA */
  uint64_t parks;           /* times this job parked at a boundary */
} gd_iteration_stats;

/* Fills *out with this job's iteration profile. Returns 0, or -1 if out is NULL. */
GD_API int gd_get_iteration_stats(gd_iteration_stats* out);

/* Marks the job as exited for the controller. Called automatically at exit. */
GD_API void gd_detach(void);

#ifdef __cplusplus
}
#endif

#endif /* GANDIVA_GANDIVA_H_ */
