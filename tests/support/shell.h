// Shared by the test programs: runs a command line through /bin/sh, as outside users run tfm.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tfm::test_support {

struct ShellResult {
  int status;       // the exit code; 128 + the signal when one ended the command, as sh reports it
  std::string out;  // standard output (the command line decides where stderr goes)
};

inline ShellResult shell(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  ShellResult r{-1, ""};
  if (!pipe) return r;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  return r;
}

}  // namespace tfm::test_support
