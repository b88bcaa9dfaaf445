// The `tfm` program's server commands as processes: `tfm serve` prints its address, serves, and on SIGTERM
// stops accepting, lets the request in flight finish, and exits with status 0; `tfm bench serve` measures a
// server.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "live_server.h"

namespace tfm::server::test {
namespace {

// A child process running `tfm serve` on a free port, its standard output read through a pipe.
class ServeProcess {
 public:
  ServeProcess() {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      execl(TFM_BINARY, TFM_BINARY, "serve", "--port", "0", "--device", "cpu", "--dtype", "float32",
            "--kv-cache-blocks", "256", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    stdout_ = fdopen(out[0], "r");
    // "tfm serve: tfm-demo on cpu, listening on http://127.0.0.1:PORT"
    char line[512];
    if (stdout_ && fgets(line, sizeof line, stdout_)) {
      const std::string text = line;
      const size_t colon = text.rfind(':');
      if (text.find("listening on http://127.0.0.1:") != std::string::npos)
        port_ = std::stoi(text.substr(colon + 1));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdout_) fclose(stdout_);
  }

  int port() const { return port_; }
  void signal(int sig) const { kill(pid_, sig); }
  // The exit status, or -1 when it was killed by a signal.
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  int port_ = 0;
  bool exited_ = false;
};

TEST(ServeCommand, SigtermLetsTheRequestInFlightFinishThenExitsZero) {
  ServeProcess serve;
  ASSERT_GT(serve.port(), 0) << "tfm serve did not print its address";
  httplib::Client c("127.0.0.1", serve.port());
  ASSERT_EQ(to_reply(c.Get("/health")).status, 200);

  const Stream s = stream_interrupted(
      serve.port(), "/v1/chat/completions",
      json::Object{{"messages", json::Array{json::Object{{"role", "user"}, {"content", "Hello"}}}},
                   {"max_tokens", 200},
                   {"temperature", 0},
                   {"stream", true}},
      2, [&] { serve.signal(SIGTERM); });
  EXPECT_EQ(serve.wait(), 0);
  ASSERT_TRUE(s.done) << s.raw;
  EXPECT_FALSE(s.events.back().contains("error")) << s.raw;
  EXPECT_FALSE(s.events.back().at("choices")[0].at("finish_reason").is_null()) << s.raw;
  httplib::Client after("127.0.0.1", serve.port());
  EXPECT_EQ(to_reply(after.Get("/health")).status, 0) << "still accepting connections after exit";
}

TEST(BenchServeCommand, MeasuresEveryRequestOfTheWorkload) {
  LiveServer server;
  for (const char* prompt : {"ids", "text"}) {
    FILE* pipe = popen(
        (std::string(TFM_BINARY) + " bench serve --url http://127.0.0.1:" + std::to_string(server.port()) +
         " --num-prompts 8 --request-rate 40 --input-len 12" + " --output-len 5 --json --prompt " + prompt)
            .c_str(),
        "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    ASSERT_EQ(pclose(pipe), 0) << out;
    const json::Value r = json::parse(out);
    EXPECT_EQ(r.at("model").as_string(), kModelName);
    EXPECT_EQ(r.at("completed").as_int(), 8);
    EXPECT_EQ(r.at("output_tokens").as_int(), 8 * 5) << "every request generates exactly --output-len tokens";
    if (std::string(prompt) == "ids") {
      EXPECT_EQ(r.at("input_tokens").as_int(), 8 * 12);
    }
    EXPECT_GT(r.at("output_tokens_per_s").as_double(), 0);
    EXPECT_GT(r.at("ttft_ms").at("median").as_double(), 0);
    EXPECT_GT(r.at("itl_ms").at("median").as_double(), 0);
  }
}

}  // namespace
}  // namespace tfm::server::test
