#!/usr/bin/env bash
# Runs tests built with sanitizers (make test-asan, make test-tsan); see the
# Makefile for how each tree is configured. Usage: test_sanitized.sh asan|tsan BUILD_DIR
#
#   asan  ASan+UBSan, in two passes (the tests of each pass two at a time):
#         1. everything but the pytest suites, with LeakSanitizer on;
#         2. pytest suites (label pytest; which, below). Their python3 is not instrumented
#            but loads the instrumented _gandiva extension, so the ASan runtime is
#            preloaded into it (and inherited by what it starts: procps tools
#            such as pgrep hang under it, so the tests read /proc instead); leak
#            checking is off in this pass, as CPython and PyTorch free little at exit.
#         Never run under ASan: the tests that run programs under the preloaded CUDA shim
#         (shim.*: its integration tests, the stand-in's, memcap_cli; the pytest
#         suites labelled preloads_shim: integration_swap, integration_scheduler_stop;
#         the GPU suite, gpu.*). The shim exports
#         its own dlsym, and ASan's start-up resolves its interceptors through
#         dlsym before its shadow memory exists: an instrumented shim crashes
#         there (shim/exports.cc, dlsym). Its unit tests run.
#         Also left out: integration_slurm and integration_slurm_shards. Their
#         instrumented gandiva_spank.so is loaded by Slurm's own programs (sbatch,
#         slurmd's slurmstepd), which would have to run under the preloaded ASan
#         runtime, so a report in Slurm's code would fail our run; the plugin's
#         rules run under ASan in tests/slurm (pass 1).
#         Pass 2 runs, by default (make test-asan, CI), the suites that reach
#         code no unit test runs, each in a real process as users run it:
#           python_package            the _gandiva extension and libgandiva in a
#                                     Python job (boundary gate, registered state);
#                                     not its tests marked whole_example, which run
#                                     an example's whole training three times over
#                                     (5 minutes under ASan; their calls into the
#                                     library are the other tests')
#           integration_replies       every request through a real gandivad: API
#                                     server, dispatcher, each handler and reply
#           integration_launch        launched jobs: fork/exec, capped logs, wait,
#                                     restore from a checkpoint
#           security_*                the adversarial suite (tests/security): real users
#                                     against a root gandivad; peer credentials, who may
#                                     act on which job
#           integration_metrics       the metrics HTTP endpoint
#           integration_migration and integration_migration_crash, their tests
#                                     marked native_job: migrations of the
#                                     synthetic C++ job between two gandivad,
#                                     whole, with damaged frames (a 32 MiB
#                                     stream's too: the destination resets the
#                                     connection when it rejects a frame, so
#                                     they take seconds, not the source's 30 s
#                                     write deadline), and with a node stopped
#                                     or a copy resumed mid-way (migration
#                                     source, arrival, bulk channel, the job's
#                                     stream, all instrumented; its PyTorch jobs
#                                     run many times slower under the preloaded
#                                     runtime, which intercepts torch's mallocs)
#           integration_scheduler_netns  the scheduler daemon (service, store,
#                                     reconcile) over CURVE TCP, three nodes, a
#                                     node's death
#           integration_gpu_visibility  device visibility of launched jobs
#         The other suites and tests drive code that the unit tests run under
#         ASan, in more situations and for longer (slicing, packing, restarts,
#         gangs, the scheduler's policies, PyTorch jobs' checkpoints and moves):
#         make test runs them all in CI, and GANDIVA_ASAN_FULL=1 (make
#         test-asan-full) every one of them under ASan (one at a time, they
#         took 26 minutes on 2 cores; two at a time, perhaps half that).
#   tsan  TSan, the unit tests of what runs threads against each other: the job
#         runtime (boundary gate, park, lease), the checkpoint stream (prefault
#         and transfer threads), gandivad's slicer and devices, common
#         (futex), and the shim's driver-call recorder (per-thread rings and
#         their writer thread; built without CUDA). Not the pytest suites: an uninstrumented python3 with
#         PyTorch's OpenMP pool under a preloaded TSan reports races TSan cannot
#         see the synchronisation of.
#
# A report fails the run wherever it happens: in a test, or in a process a test
# starts (gandivad, a job, the CLI), whose exit code a test may not look at.
# Every report goes to a file under BUILD_DIR/sanitizer-logs, checked at the end.
set -uo pipefail
mode=${1:?usage: test_sanitized.sh asan|tsan BUILD_DIR}
build=$(cd "${2:?usage: test_sanitized.sh asan|tsan BUILD_DIR}" && pwd)
logs=$build/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
status=0

case "$mode" in
  asan)
    asan="halt_on_error=1:log_path=$logs/asan"
    (cd "$build" && ASAN_OPTIONS="$asan:detect_leaks=1" \
       ctest --output-on-failure --timeout 900 -j"${JOBS:-2}" -LE pytest -E '^(shim\.|gpu\.)') || status=1
    # libstdc++ is preloaded too: python3 does not link it, and without it the
    # ASan runtime finds no __cxa_throw to forward to (a CHECK failure at the
    # first C++ exception, e.g. Boost's when a job opens its control block).
    cxx=${CXX:-g++}
    preload="$($cxx -print-file-name=libasan.so) $($cxx -print-file-name=libstdc++.so.6)"
    pytests() {
      (cd "$build" && LD_PRELOAD="$preload" ASAN_OPTIONS="$asan:detect_leaks=0" \
         ctest --output-on-failure --timeout 900 -j"${JOBS:-2}" -L pytest -LE preloads_shim "$@")
    }
    if [ "${GANDIVA_ASAN_FULL:-0}" = 1 ]; then
      pytests -E '^(shim\..*|integration_slurm.*|gpu\..*)$' || status=1
    else
      PYTEST_ADDOPTS='-m "not whole_example"' \
        pytests -R '^(python_package|integration_(replies|launch|metrics|scheduler_netns|gpu_visibility)|security_.*)$' ||
        status=1
      PYTEST_ADDOPTS="-m native_job" pytests -R '^integration_migration(_crash)?$' || status=1
    fi
    ;;
  tsan)
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$logs/tsan"
    # Three single-threaded checks of every byte of a stream (each truncation, each
    # corrupt frame header, the CRC against memcpy) took 66 of the checkpoint tests'
    # 203 s under TSan, with no second thread for it to watch: make test and the
    # ASan run keep them.
    serial="StreamTest.EveryTruncationIsDetectedBeforeAnyLoad:StreamTest.CorruptFrameHeaderIsDetected"
    serial="$serial:Crc32cTest.CopyingMatchesMemcpyThenCrc"
    for t in tests/common/common_test tests/job/runtime/runtime_test \
             tests/job/checkpoint/checkpoint_test tests/node/node_test tests/shim_trace_test; do
      echo "== $t"
      filter=()
      [ "$t" = tests/job/checkpoint/checkpoint_test ] && filter=(--gtest_filter="-$serial")
      "$build/$t" --gtest_brief=1 "${filter[@]}" || status=1
    done
    ;;
  *)
    echo "test_sanitized.sh: unknown mode '$mode' (asan or tsan)" >&2
    exit 2
    ;;
esac

if compgen -G "$logs/*" > /dev/null; then
  echo "test_sanitized.sh: sanitizer reports:" >&2
  for f in "$logs"/*; do
    echo "---- $f" >&2
    cat "$f" >&2
  done
  status=1
fi
[ "$status" -eq 0 ] && echo "test_sanitized.sh: $mode: no sanitizer reports, all tests passed"
exit "$status"
