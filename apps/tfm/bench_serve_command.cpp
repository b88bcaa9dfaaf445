#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include "commands.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/server/event_stream_reader.h"

namespace tfm::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Words of a text prompt; one or two tokens each for most tokenizers.
constexpr const char* kWords[] = {"the",   "old",   "man",   "river", "house", "walked", "said", "light",
                                  "under", "green", "small", "road",  "night", "water",  "city", "before"};

struct Settings {
  std::string url;
  std::string model;
  std::optional<std::string> api_key;
  int64_t num_prompts = 0;
  double request_rate = 0;  // requests per second; infinity: all at once
  int64_t input_len = 0;
  int64_t output_len = 0;
  bool text_prompts = false;
  int64_t vocab = 0;
};

// One request's timeline, as the client saw it.
struct Measured {
  bool ok = false;
  std::string error;
  double ttft = 0;          // seconds from sending to the first text
  std::vector<double> itl;  // seconds between later events that carried text
  double latency = 0;       // seconds from sending to the end of the stream
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

httplib::Client client_for(const Settings& s) {
  httplib::Client c(s.url);
  c.set_read_timeout(3600);
  c.set_connection_timeout(30);
  if (s.api_key) c.set_bearer_token_auth(*s.api_key);
  return c;
}

// The served model's name: the first of /v1/models.
std::string served_model(const Settings& s) {
  auto c = client_for(s);
  const auto r = c.Get("/v1/models");
  check(r && r->status == 200, "bench serve: GET ", s.url,
        "/v1/models failed: ", r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
  return json::parse(r->body).at("data")[0].at("id").as_string();
}

json::Value prompt(const Settings& s, std::mt19937_64& rng) {
  if (s.text_prompts) {
    std::string text;
    for (int64_t i = 0; i < s.input_len; ++i)
      text += std::string(i ? " " : "") + kWords[rng() % std::size(kWords)];
    return text;
  }
  json::Array ids;
  for (int64_t i = 0; i < s.input_len; ++i)
    ids.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(s.vocab)));
  return ids;
}

// Streams one completion of exactly output_len tokens and times its events.
Measured run_request(const Settings& s, const json::Value& prompt) {
  Measured m;
  auto c = client_for(s);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json::dump(json::Object{{"model", s.model},
                                     {"prompt", prompt},
                                     {"max_tokens", s.output_len},
                                     {"ignore_eos", true},
                                     {"temperature", 0},
                                     {"stream", true},
                                     {"stream_options", json::Object{{"include_usage", true}}}});
  req.set_header("Content-Type", "application/json");
  server::EventStreamReader reader;
  std::string body;  // the start of an error response, for its message
  constexpr size_t kErrorBodyBytes = 4096;
  int status = 0;
  bool done = false;
  const auto start = Clock::now();
  auto last = start;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) body.append(data, std::min(n, kErrorBodyBytes - body.size()));
    for (const std::string& event : reader.add({data, n})) {
      if (event == "[DONE]") {
        done = true;
        continue;
      }
      const json::Value e = json::parse(event);
      if (const json::Value* error = e.find("error")) m.error = json::dump(*error);
      if (const json::Value* usage = e.find("usage"); usage && !usage->is_null()) {
        m.prompt_tokens = usage->at("prompt_tokens").as_int();
        m.output_tokens = usage->at("completion_tokens").as_int();
      }
      const json::Value* choices = e.find("choices");
      if (!choices || choices->size() == 0 || (*choices)[0].at("text").as_string().empty()) continue;
      const auto now = Clock::now();
      if (last == start) {
        m.ttft = std::chrono::duration<double>(now - start).count();
      } else {
        m.itl.push_back(std::chrono::duration<double>(now - last).count());
      }
      last = now;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  c.send(req, res, error);
  m.latency = seconds_since(start);
  if (error != httplib::Error::Success) {
    m.error = httplib::to_string(error);
  } else if (status != 200) {
    m.error = std::to_string(status) + " " + body;
  } else if (!done && m.error.empty()) {
    m.error = "the stream ended without [DONE]";
  }
  m.ok = m.error.empty();
  return m;
}

struct Summary {
  double mean = 0, median = 0, p99 = 0;
};

Summary summarize(std::vector<double> xs) {
  Summary s;
  if (xs.empty()) return s;
  std::sort(xs.begin(), xs.end());
  for (double x : xs) s.mean += x;
  s.mean /= static_cast<double>(xs.size());
  const auto at = [&](double q) {
    return xs[static_cast<size_t>(q * static_cast<double>(xs.size() - 1) + 0.5)];
  };
  s.median = at(0.5);
  s.p99 = at(0.99);
  return s;
}

json::Value summary_ms(const Summary& s) {
  return json::Object{{"mean", s.mean * 1000}, {"median", s.median * 1000}, {"p99", s.p99 * 1000}};
}

int run(Args& args) {
  Settings s;
  s.url = args.get_or("url", "http://127.0.0.1:8000");
  s.api_key = args.get("api-key");
  const std::optional<std::string> model = args.get("model");
  s.num_prompts = args.get_int("num-prompts", 100);
  const std::string rate = args.get_or("request-rate", "inf");
  s.input_len = args.get_int("input-len", 128);
  s.output_len = args.get_int("output-len", 128);
  const std::string kind = args.get_or("prompt", "ids");
  s.vocab = args.get_int("vocab", 1000);
  const auto seed = static_cast<uint64_t>(args.get_int("seed", 0));
  const bool as_json = args.flag("json");
  args.finish();
  check(s.num_prompts > 0 && s.input_len > 0 && s.output_len > 0,
        "--num-prompts, --input-len and --output-len must be positive");
  check(kind == "ids" || kind == "text", "--prompt must be ids or text, got ", kind);
  check(s.vocab > 0, "--vocab must be positive, got ", s.vocab);
  s.text_prompts = kind == "text";
  s.request_rate = rate == "inf" ? std::numeric_limits<double>::infinity() : std::stod(rate);
  check(s.request_rate > 0, "--request-rate must be positive or inf, got ", rate);
  s.model = model ? *model : served_model(s);

  // The workload is fixed by the seed: the prompts and the gaps between arrivals (a Poisson process at the
  // rate).
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(std::isinf(s.request_rate) ? 1.0 : s.request_rate);
  std::vector<json::Value> prompts;
  std::vector<double> send_at;  // seconds from the start
  double t = 0;
  for (int64_t i = 0; i < s.num_prompts; ++i) {
    prompts.push_back(prompt(s, rng));
    send_at.push_back(t);
    if (!std::isinf(s.request_rate)) t += gap(rng);
  }

  std::vector<Measured> measured(static_cast<size_t>(s.num_prompts));
  std::vector<std::thread> requests;
  const auto start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(send_at[i])));
    requests.emplace_back([&, i] { measured[i] = run_request(s, prompts[i]); });
  }
  for (std::thread& r : requests) r.join();
  const double duration = seconds_since(start);

  int64_t completed = 0, input_tokens = 0, output_tokens = 0;
  std::vector<double> ttft, itl, tpot, latency;
  std::string first_error;
  for (const Measured& m : measured) {
    if (!m.ok) {
      if (first_error.empty()) first_error = m.error;
      continue;
    }
    ++completed;
    input_tokens += m.prompt_tokens;
    output_tokens += m.output_tokens;
    ttft.push_back(m.ttft);
    itl.insert(itl.end(), m.itl.begin(), m.itl.end());
    latency.push_back(m.latency);
    if (m.output_tokens > 1) tpot.push_back((m.latency - m.ttft) / static_cast<double>(m.output_tokens - 1));
  }

  json::Value out;
  out.set("url", s.url);
  out.set("model", s.model);
  out.set("num_prompts", s.num_prompts);
  out.set("request_rate", std::isinf(s.request_rate) ? json::Value("inf") : json::Value(s.request_rate));
  out.set("input_len", s.input_len);
  out.set("output_len", s.output_len);
  out.set("completed", completed);
  out.set("failed", s.num_prompts - completed);
  out.set("input_tokens", input_tokens);
  out.set("output_tokens", output_tokens);
  out.set("duration_s", duration);
  out.set("requests_per_s", static_cast<double>(completed) / duration);
  out.set("output_tokens_per_s", static_cast<double>(output_tokens) / duration);
  out.set("total_tokens_per_s", static_cast<double>(input_tokens + output_tokens) / duration);
  out.set("ttft_ms", summary_ms(summarize(ttft)));
  out.set("tpot_ms", summary_ms(summarize(tpot)));
  out.set("itl_ms", summary_ms(summarize(itl)));
  out.set("latency_ms", summary_ms(summarize(latency)));
  if (!first_error.empty()) out.set("first_error", first_error);
  if (as_json) {
    std::cout << json::dump(out) << "\n";
  } else {
    std::cout << std::fixed << std::setprecision(2) << completed << " of " << s.num_prompts << " requests ("
              << s.input_len << " + " << s.output_len << " tokens) in " << duration
              << " s: " << out.at("output_tokens_per_s").as_double() << " output tokens/s, "
              << out.at("total_tokens_per_s").as_double() << " total tokens/s, "
              << out.at("requests_per_s").as_double() << " requests/s\n";
    for (const char* name : {"ttft_ms", "tpot_ms", "itl_ms", "latency_ms"}) {
      const json::Value& v = out.at(name);
      std::cout << "  " << std::left << std::setw(11) << name << " mean " << v.at("mean").as_double()
                << "  median " << v.at("median").as_double() << "  p99 " << v.at("p99").as_double() << "\n";
    }
    if (!first_error.empty()) std::cout << "first error: " << first_error << "\n";
  }
  return completed == s.num_prompts ? 0 : 1;
}

}  // namespace

const Command kBenchServeCommand{
    "bench serve", "latency and throughput of a running server (tfm serve or any OpenAI-compatible one)",
    "usage: tfm bench serve [--url http://127.0.0.1:8000] [--num-prompts 100] [--request-rate inf]\n"
    "                       [--input-len 128] [--output-len 128] [--prompt ids|text] [--json]\n\n"
    "Sends --num-prompts streamed /v1/completions requests, arriving as a Poisson process of --request-rate\n"
    "requests per second (inf: all at once), each of --input-len random prompt tokens and asking for "
    "exactly\n"
    "--output-len tokens (greedy, \"ignore_eos\": true, as vLLM's benchmark). Prints throughput (requests,\n"
    "output and total tokens per second over the whole run) and, in milliseconds, the mean, median and 99th\n"
    "percentile of the time to first token (TTFT), time per output token after the first (TPOT), the time\n"
    "between streamed events (ITL) and whole-request latency. Exits 1 when a request failed.\n\n"
    "options:\n"
    "  --url URL                   the server (default: http://127.0.0.1:8000)\n"
    "  --api-key KEY               sent as \"Authorization: Bearer KEY\"\n"
    "  --model NAME                the model field (default: the first of the server's /v1/models)\n"
    "  --prompt ids|text           random token ids below --vocab (exact prompt lengths), or random English\n"
    "                              words, one word per --input-len (default: ids)\n"
    "  --vocab N                   token ids are drawn below N (default: 1000, which any vocabulary holds)\n"
    "  --seed S                    the workload's random seed: prompts and arrival times (default: 0)\n"
    "  --json                      one JSON object instead of the table\n",
    run};

}  // namespace tfm::cli
