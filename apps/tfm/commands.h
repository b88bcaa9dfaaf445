// Every subcommand of `tfm`, one file each; main.cpp lists them.
#pragma once

#include "cli.h"

namespace tfm::cli {

extern const Command kDevicesCommand;
extern const Command kKernelsCommand;
extern const Command kBenchThroughputCommand;
extern const Command kBenchServeCommand;
extern const Command kForwardCommand;
extern const Command kGenerateCommand;
extern const Command kChatCommand;
extern const Command kTokenizeCommand;
extern const Command kDetokenizeCommand;
extern const Command kChatTemplateCommand;
extern const Command kBenchLatencyCommand;
extern const Command kServeCommand;
extern const Command kTrainCommand;
extern const Command kMergeAdapterCommand;

}  // namespace tfm::cli
