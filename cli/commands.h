// Subcommands of the `gandiva` command-line tool. Each takes the arguments after
// its own name and returns the process exit code.
#ifndef GANDIVA_CLI_COMMANDS_H_
#define GANDIVA_CLI_COMMANDS_H_

#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::cli {

using Args = std::vector<std::string>;

int DaemonCommand(const Args& args);  // gandiva daemon ...   (controller/)
int RunCommand(const Args& args);     // gandiva run ... -- CMD
int PsCommand(const Args& args);      // gandiva ps
int JobActionCommand(const std::string& action, const Args& args);  // suspend|resume|kill JOB
int SliceCommand(const Args& args);     // gandiva slice --device D --ms N
int WeightCommand(const Args& args);    // gandiva weight JOB W
int ShareCommand(const Args& args);     // gandiva share DEVICE pack|slice|auto
int AssignCommand(const Args& args);    // gandiva assign JOB --device D
int TopCommand(const Args& args);       // gandiva top
int SwitchesCommand(const Args& args);  // gandiva switches [--device D]
int DevicesCommand(const Args& args);   // gandiva devices
int SimCommand(const Args& args);       // gandiva sim ...  (scheduler simulator)
// "gandiva sim: MSG" on stderr; returns 2, the exit code of every sim command's bad input.
int SimFail(const std::string& msg);
// gandiva sim --alibaba DIR --placement ...: the fractional-GPU placement experiment.
bool IsPlacementExperiment(const Args& args);
int SimPlacementCommand(const Args& args);
// A JSON report to `path`: '-' is stdout, 'none' nothing; "wrote PATH" on stderr.
Status WriteJsonReport(const std::string& json, const std::string& path);
// gandiva sim --pack-prediction: the pack predictor against always trying.
bool IsPackPrediction(const Args& args);
int SimPackCommand(const Args& args);
// gandiva sim --failures: failure handling (retry, classify, validate) on the Philly trace.
bool IsFailureExperiment(const Args& args);
int SimFailuresCommand(const Args& args);
int KeygenCommand(const Args& args);      // gandiva keygen --out DIR [--name N]
int CheckpointCommand(const Args& args);  // gandiva checkpoint JOB --to DIR
int MigrateCommand(const Args& args);     // gandiva migrate JOB --to NODE[:DEVICE]
int LogsCommand(const Args& args);        // gandiva logs JOB [--follow] [--stderr]
int WaitCommand(const Args& args);        // gandiva wait JOB [--scheduler]
int SchedulerCommand(const Args& args);   // gandiva scheduler ...  (the live cluster scheduler)
int SubmitCommand(const Args& args);      // gandiva submit ... -- CMD
int QueueCommand(const Args& args);       // gandiva queue
int CancelCommand(const Args& args);      // gandiva cancel JOB
int CdiCommand(const Args& args);         // gandiva cdi generate [--output FILE]

}  // namespace gandiva::cli

#endif  // GANDIVA_CLI_COMMANDS_H_
