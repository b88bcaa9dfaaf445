#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "commands.h"
#include "model_args.h"
#include "tfm/core/error.h"
#include "tfm/server/http_server.h"
#include "tfm/server/served_model.h"

namespace tfm::cli {
namespace {

int run(Args& args) {
  // SIGTERM and SIGINT are received by sigwait() below. Blocked before any thread starts, they stay blocked
  // in every thread (threads inherit the mask), so none of them is interrupted.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const bool demo = !args.get("model");
  ModelArgs m = read_model_args(args);
  server::ServerConfig server;
  server.host = args.get_or("host", server.host);
  server.port = static_cast<int>(args.get_int("port", server.port));
  server.api_key = args.get("api-key");
  if (const char* key = std::getenv("TFM_API_KEY"); !server.api_key && key && *key) server.api_key = key;
  if (const auto grace = args.get_double("shutdown-grace")) {
    check(*grace >= 0, "--shutdown-grace must not be negative, got ", *grace);
    server.shutdown_grace = std::chrono::milliseconds(static_cast<int64_t>(*grace * 1000));
  }
  server.max_connections = args.get_int("max-connections", server.max_connections);
  EngineConfig engine;
  engine.scheduler.max_batch_tokens = args.get_int("max-batch-tokens", engine.scheduler.max_batch_tokens);
  engine.scheduler.max_num_seqs = args.get_int("max-num-seqs", engine.scheduler.max_num_seqs);
  if (const auto blocks = args.get_int("kv-cache-blocks")) engine.num_blocks = *blocks;
  engine.async_batching = args.toggle("async-batching");
  args.finish();
  check(server.port >= 0 && server.port <= 65535, "--port must be in [0, 65535], got ", server.port);

  server::ServedModel served(m.dir, demo ? "tfm-demo" : m.id, m.options, engine);
  server::HttpServer http(served.service(), server);
  http.start();
  std::cout << "tfm serve: " << served.service().model_name() << " on " << served.model().device().str()
            << ", listening on " << http.address() << std::endl;

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::cerr << "tfm serve: " << strsignal(signal) << ": no new requests; finishing those in flight (up to "
            << static_cast<double>(server.shutdown_grace.count()) / 1000 << " s)" << std::endl;
  http.shutdown();
  return 0;
}

}  // namespace

const Command kServeCommand{
    "serve", "serve a model over an OpenAI-compatible HTTP API",
    "usage: tfm serve [--model ID|DIR] [--host H] [--port P] [--api-key KEY] [options]\n\n"
    "Serves one model over HTTP with OpenAI's API, many requests at once (continuous batching over a paged\n"
    "KV cache). Prints the address once it listens. SIGTERM or SIGINT stops it: new connections are refused\n"
    "and new requests get 503, requests in flight finish (for up to --shutdown-grace seconds, then they end\n"
    "with an error), and it exits with status 0.\n\n"
    "endpoints:\n"
    "  POST /v1/chat/completions   messages (through the model's chat template), stream, stream_options\n"
    "                              {include_usage}, n, stop, max_completion_tokens / max_tokens, "
    "temperature,\n"
    "                              top_p, seed, presence_penalty, frequency_penalty, logprobs, top_logprobs\n"
    "  POST /v1/completions        prompt (a string, a list of strings, a list of token ids or a list of\n"
    "                              lists), and the same fields; logprobs is the number of top log\n"
    "                              probabilities (0 to 20)\n"
    "  GET  /v1/models             the model, named by --model (\"tfm-demo\" for the demo model)\n"
    "  GET  /health                200, or 503 once shutting down (needs no API key)\n"
    "  GET  /metrics               Prometheus metrics: queue, KV cache blocks, prefix-cache hits, tokens,\n"
    "                              time-to-first-token and inter-token-latency histograms (needs no API "
    "key)\n\n"
    "Requests sample unless their temperature is 0 (greedy); unset temperature and top_p come from the\n"
    "model's generation_config.json, else OpenAI's defaults (1, 1, no top-k). max_tokens defaults to the\n"
    "rest of the context for chat and to 16 for completions. Choices of one request (n) share its seed,\n"
    "each drawing its own numbers. Streamed text is sent as soon as it is settled: an incomplete UTF-8\n"
    "character, or an end that could begin a stop string, waits for the next tokens. Errors come in\n"
    "OpenAI's shape, {\"error\": {\"message\", \"type\", \"param\", \"code\"}}; a client that disconnects\n"
    "during a stream cancels its request.\n\n"
    "options:\n"
    "  --host H                    the address to listen on (default: 127.0.0.1, this machine only)\n"
    "  --port P                    the port (default: 8000; 0: any free port)\n"
    "  --api-key KEY               require \"Authorization: Bearer KEY\" on /v1/ requests (default: the\n"
    "                              TFM_API_KEY environment variable; unset: no key needed)\n"
    "  --max-batch-tokens N        tokens computed per engine step (default: 8192)\n"
    "  --max-num-seqs N            requests computed at once; more wait (default: 1024)\n"
    "  --kv-cache-blocks N         KV cache blocks of 16 tokens (default: what 90% of the device's free\n"
    "                              memory holds, at most enough for max-num-seqs full contexts)\n"
    "  --[no-]async-batching       plan each engine step while the device runs the one before (default: on\n"
    "                              for cuda and xpu, off on the cpu)\n"
    "  --max-connections N         connections served at once, one thread each (default: 512)\n"
    "  --shutdown-grace S          seconds requests in flight may run after SIGTERM (default: 30)\n" +
        std::string(kModelHelp) + kRunHelp,
    run};

}  // namespace tfm::cli
