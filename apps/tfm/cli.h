// The pieces every subcommand of the `tfm` program shares: its argument reader and its entry in the table.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::cli {

// Reads "--name value", "--name=value" and "--flag". Every option a command accepts must be asked for before
// finish(), which rejects whatever was not asked for, so a misspelt option is an error, never ignored.
class Args {
 public:
  Args(std::vector<std::string> words);

  std::optional<std::string> get(std::string_view name);
  std::string get_or(std::string_view name, std::string_view fallback);
  int64_t get_int(std::string_view name, int64_t fallback);
  std::optional<int64_t> get_int(std::string_view name);
  std::optional<double> get_double(std::string_view name);
  bool flag(std::string_view name);
  // A flag that can also be turned off: --name is true, --no-name false, neither nullopt (the default decides).
  std::optional<bool> toggle(std::string_view name);
  bool help() const { return help_; }
  // --quiet, which every command takes: only results and errors (no warnings, progress bars or timing).
  bool quiet() const { return quiet_; }
  // The options no get() or flag() has asked for, as command-line words again ("--name", "value"), marked
  // used: for a command that hands them on to a parser of its own (train's TrainingArguments).
  std::vector<std::string> take_unused();
  void finish();

 private:
  struct Word {
    std::string name;
    std::optional<std::string> value;
    bool used = false;
  };
  std::vector<Word> words_;
  bool help_ = false;
  bool quiet_ = false;
  Word* find(std::string_view name);
};

struct Command {
  std::string_view name;
  std::string_view summary;  // one line, for `tfm --help`
  std::string usage;         // the whole --help text
  int (*run)(Args& args);    // returns the exit code; throws tfm::Error for user errors
};

// The usage lines of the options every command takes, for --help texts.
extern const char* const kCommonHelp;

// Reads all of standard input (the tokenize, detokenize and chat-template commands take JSON there).
std::string read_stdin();
// "1,2,3" -> {1, 2, 3}; errors name the bad element.
std::vector<int64_t> parse_id_list(std::string_view text);

}  // namespace tfm::cli
