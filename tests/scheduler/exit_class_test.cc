// ClassifyRunEnd on the endings real jobs have: the messages are what Python,
// argparse, PyTorch, the CUDA driver and the kernel print (the live test,
// tests/integration/test_failures.py, makes real jobs end these ways).
#include "live/exit_class.h"

#include <gtest/gtest.h>

namespace gandiva::sched::live {
namespace {

RunEnd Exited(int code, std::string tail = "") {
  RunEnd e;
  e.reason = "exited";
  e.exit_code = code;
  e.output_tail = std::move(tail);
  return e;
}

RunEnd Killed(int signal, std::string tail = "") {
  RunEnd e;
  e.reason = "killed";
  e.signal = signal;
  e.exit_code = 128 + signal;
  e.output_tail = std::move(tail);
  return e;
}

const char* kTracebackHead =
    "Traceback (most recent call last):\n"
    "  File \"/data/train.py\", line 12, in <module>\n"
    "    main()\n";

struct Case {
  RunEnd end;
  FailureClass failure;
  std::string cause;  // a part of it
};

TEST(ExitClassTest, TheEndingsOfRealJobs) {
  const Case cases[] = {
      {Exited(0), FailureClass::kNone, ""},
      {Exited(1, std::string(kTracebackHead) + "  File \"/data/train.py\", line 7\n"
                                               "    for x in range(3)\n"
                                               "                     ^\n"
                                               "SyntaxError: expected ':'\n"),
       FailureClass::kUser, "syntax error"},
      {Exited(1, std::string(kTracebackHead) + "ModuleNotFoundError: No module named 'apex'\n"),
       FailureClass::kUser, "import error"},
      {Exited(2,
              "usage: train.py [-h] [--lr LR]\ntrain.py: error: unrecognized arguments: --lrr\n"),
       FailureClass::kUser, "argument error"},
      {Exited(1, std::string(kTracebackHead) +
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB\n"),
       FailureClass::kUser, "GPU out of memory"},
      {Exited(1, std::string(kTracebackHead) + "MemoryError\n"), FailureClass::kUser,
       "CPU out of memory"},
      {Exited(1, std::string(kTracebackHead) +
                     "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"),
       FailureClass::kInfrastructure, "ECC"},
      {Exited(1,
              "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error\n"),
       FailureClass::kInfrastructure, "NCCL"},
      {Exited(1, std::string(kTracebackHead) + "KeyError: 'learning_rate'\n"), FailureClass::kUser,
       "crashed with KeyError"},
      {Exited(3, "loss diverged\n"), FailureClass::kUser, "exited with code 3"},
      {Killed(9), FailureClass::kPreempted, "signal 9"},
      {Killed(15), FailureClass::kPreempted, "signal 15"},
      {Killed(11), FailureClass::kUser, "crashed with signal 11"},
      // A shell between gandivad and the trainer reports its child's SIGKILL as 137.
      {Exited(137), FailureClass::kPreempted, "signal 9"},
      {Exited(139), FailureClass::kUser, "exited with code 139"},
  };
  for (const Case& c : cases) {
    const Classified got = ClassifyRunEnd(c.end);
    EXPECT_EQ(got.failure, c.failure) << c.end.output_tail << " -> " << got.cause;
    EXPECT_NE(got.cause.find(c.cause), std::string::npos) << got.cause;
  }
}

TEST(ExitClassTest, HowItEndedDecidesWhenTheOutputSaysNothing) {
  RunEnd start;
  start.reason = "failed_to_start";
  start.exit_code = 127;
  start.detail = "no such file: /usr/bin/pythn";
  EXPECT_EQ(ClassifyRunEnd(start).failure, FailureClass::kUser);
  EXPECT_NE(ClassifyRunEnd(start).cause.find("/usr/bin/pythn"), std::string::npos);
  // Its exit status was lost with a restarted gandivad: a clean detach and no
  // error in its output is taken as its own end; anything else is not known
  // well enough to run it again (it may still run, unmanaged).
  RunEnd lost;
  lost.reason = "lost";
  lost.detail = "it ended while gandivad was away";
  EXPECT_EQ(ClassifyRunEnd(lost).failure, FailureClass::kUnknown);
  EXPECT_FALSE(IsRetryable(FailureClass::kUnknown));
  lost.detached = true;
  EXPECT_EQ(ClassifyRunEnd(lost).failure, FailureClass::kNone);
  lost.output_tail = "Traceback (most recent call last):\nValueError: bad shape\n";
  EXPECT_EQ(ClassifyRunEnd(lost).failure, FailureClass::kUser) << "its output says it failed";
}

TEST(ExitClassTest, ADeviceErrorOutranksThePythonErrorItSurfacesAs) {
  // The device failed under the job: a RuntimeError in Python, but not the job's fault.
  const Classified c = ClassifyRunEnd(Exited(
      1, std::string(kTracebackHead) + "RuntimeError: CUDA error: GPU has fallen off the bus\n"));
  EXPECT_EQ(c.failure, FailureClass::kInfrastructure);
  EXPECT_TRUE(IsRetryable(c.failure));
  EXPECT_FALSE(IsRetryable(FailureClass::kUser));
}

TEST(ExitClassTest, NamesRoundTrip) {
  for (FailureClass c : {FailureClass::kNone, FailureClass::kUser, FailureClass::kInfrastructure,
                         FailureClass::kPreempted, FailureClass::kUnknown})
    EXPECT_EQ(ParseFailureClass(FailureClassName(c)), c);
  EXPECT_FALSE(ParseFailureClass("bogus").has_value());
}

}  // namespace
}  // namespace gandiva::sched::live
