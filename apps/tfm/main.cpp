// `tfm`: the command-line program. Each subcommand lives in its own file; this one only dispatches.
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "tfm/core/error.h"
#include "tfm/core/logging.h"

namespace {

const tfm::cli::Command* const kCommands[] = {
    &tfm::cli::kGenerateCommand,     &tfm::cli::kChatCommand,     &tfm::cli::kForwardCommand,
    &tfm::cli::kDevicesCommand,      &tfm::cli::kKernelsCommand,  &tfm::cli::kTokenizeCommand,
    &tfm::cli::kDetokenizeCommand,   &tfm::cli::kChatTemplateCommand, &tfm::cli::kServeCommand, &tfm::cli::kTrainCommand,
    &tfm::cli::kBenchThroughputCommand, &tfm::cli::kBenchServeCommand, &tfm::cli::kBenchLatencyCommand,
    &tfm::cli::kMergeAdapterCommand,
};

void print_usage(std::ostream& out) {
  out << "usage: tfm <command> [options]\n\ncommands:\n";
  for (const auto* c : kCommands)
    out << "  " << c->name << std::string(c->name.size() < 18 ? 18 - c->name.size() : 1, ' ') << c->summary << "\n";
  out << "  version           print tfm's version (also: tfm --version)\n"
      << "\n`tfm <command> --help` describes a command. Every command takes:\n"
      << tfm::cli::kCommonHelp;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(std::cerr);
    return 2;
  }
  // A command of two words ("bench throughput") is matched on both.
  const std::string name = argv[1];
  const std::string two_words = argc > 2 ? name + " " + argv[2] : "";
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(std::cout);
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::cout << "tfm " << TFM_VERSION << "\n";
    return 0;
  }
  for (const auto* c : kCommands) {
    const bool two = c->name == two_words;
    if (c->name != name && !two) continue;
    try {
      tfm::cli::Args args(std::vector<std::string>(argv + (two ? 3 : 2), argv + argc));
      if (args.help()) {
        std::cout << c->usage << tfm::cli::kCommonHelp;
        return 0;
      }
      if (args.quiet()) {
        tfm::logging::set_verbosity(tfm::logging::Level::error);
        ::setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1", 1);  // downloads and weight loading both honour it
      }
      return c->run(args);
    } catch (const std::bad_alloc&) {
      std::cerr << "error: out of memory\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 1;
    }
  }
  // The first word of commands of two words ("bench"): name the second words it takes.
  std::string second_words;
  for (const auto* c : kCommands) {
    if (!c->name.starts_with(name + " ")) continue;
    if (!second_words.empty()) second_words += ", ";
    second_words += c->name.substr(name.size() + 1);
  }
  if (!second_words.empty()) {
    std::cerr << "error: 'tfm " << name << "' takes one of: " << second_words << " (`tfm " << name
              << " <one> --help` describes it)\n";
    return 2;
  }
  std::cerr << "error: unknown command '" << name << "'\n";
  print_usage(std::cerr);
  return 2;
}
