// The OpenAI-compatible API over raw HTTP, against the demo model served from inside the test: answers match
// what generate() gives for the same prompt, streamed answers the whole ones, and every error comes in
// OpenAI's shape with its status.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "live_server.h"
#include "tfm/generate/auto.h"

namespace tfm::server::test {
namespace {

using json::Array;
using json::Object;
using json::Value;

class ServerApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<LiveServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  // A client of its own per call: tests that hang up do not disturb the others' connections.
  static httplib::Client client() { return server_->client(); }
  static Reply completions(const Value& body) {
    auto c = client();
    return post(c, "/v1/completions", body);
  }
  static Reply chat(const Value& body) {
    auto c = client();
    return post(c, "/v1/chat/completions", body);
  }
  static Stream stream(const std::string& path, const Value& body) {
    auto c = client();
    return post_stream(c, path, body);
  }

  static std::unique_ptr<LiveServer> server_;
};

std::unique_ptr<LiveServer> ServerApi::server_;

const Value kHello = Array{Object{{"role", "user"}, {"content", "Hello there"}}};

const tokenizer::Tokenizer& tokenizer() {
  static const tokenizer::Tokenizer t = AutoTokenizer::from_pretrained(kDemoModel);
  return t;
}

// What generate() makes of `ids` greedily, as text.
std::string greedy_text(const std::vector<int64_t>& ids, int64_t max_new_tokens) {
  static AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(
      kDemoModel, {.dtype = "float32", .device_map = "cpu", .progress = false});
  const GenerateOutput out =
      model.generate({ids}, {{"max_new_tokens", max_new_tokens}, {"do_sample", false}});
  return tokenizer().decode(out.tokens[0], /*skip_special_tokens=*/true);
}

std::string streamed_text(const Stream& s, const std::string& field) {
  std::string text;
  for (const Value& e : s.events) {
    for (const Value& choice : e.at("choices").as_array()) {
      const Value& part = field == "text" ? choice.at("text") : choice.at("delta");
      if (field == "text") {
        text += part.as_string();
      } else if (const Value* content = part.find("content")) {
        text += content->as_string();
      }
    }
  }
  return text;
}

const Value& error_of(const Reply& r) {
  return r.body.at("error");
}

TEST_F(ServerApi, CompletionIsWhatGenerateGives) {
  const Reply r = completions(Object{{"prompt", "The old man said"}, {"max_tokens", 24}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << json::dump(r.body);
  EXPECT_EQ(r.body.at("object").as_string(), "text_completion");
  EXPECT_EQ(r.body.at("model").as_string(), kModelName);
  EXPECT_TRUE(r.body.at("id").as_string().starts_with("cmpl-"));
  const Value& choice = r.body.at("choices")[0];
  EXPECT_EQ(choice.at("text").as_string(), greedy_text(tokenizer().encode("The old man said"), 24));
  EXPECT_EQ(choice.at("finish_reason").as_string(), "length");
  EXPECT_TRUE(choice.at("logprobs").is_null());
  const Value& usage = r.body.at("usage");
  EXPECT_EQ(usage.at("prompt_tokens").as_int(),
            static_cast<int64_t>(tokenizer().encode("The old man said").size()));
  EXPECT_EQ(usage.at("completion_tokens").as_int(), 24);
  EXPECT_EQ(usage.at("total_tokens").as_int(), usage.at("prompt_tokens").as_int() + 24);
}

TEST_F(ServerApi, CompletionTakesTokenIdsAndSeveralPrompts) {
  const std::vector<int64_t> ids = tokenizer().encode("Once upon a time");
  Array id_prompt;
  for (int64_t id : ids) id_prompt.push_back(id);
  const Reply r = completions(Object{
      {"prompt", Array{id_prompt, Array{int64_t{5}, int64_t{6}}}}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << json::dump(r.body);
  ASSERT_EQ(r.body.at("choices").size(), 2u);
  EXPECT_EQ(r.body.at("choices")[0].at("text").as_string(), greedy_text(ids, 8));
  EXPECT_EQ(r.body.at("choices")[1].at("text").as_string(), greedy_text({5, 6}, 8));
  EXPECT_EQ(r.body.at("usage").at("prompt_tokens").as_int(), static_cast<int64_t>(ids.size()) + 2);
  // Without max_tokens a completion is 16 tokens long, as OpenAI's.
  const Reply d = completions(Object{{"prompt", "The old man said"}, {"temperature", 0}});
  EXPECT_EQ(d.body.at("usage").at("completion_tokens").as_int(), 16);
}

TEST_F(ServerApi, ChatGoesThroughTheChatTemplate) {
  const Reply r = chat(
      Object{{"model", kModelName}, {"messages", kHello}, {"max_completion_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << json::dump(r.body);
  EXPECT_EQ(r.body.at("object").as_string(), "chat.completion");
  EXPECT_TRUE(r.body.at("id").as_string().starts_with("chatcmpl-"));
  const Value& message = r.body.at("choices")[0].at("message");
  EXPECT_EQ(message.at("role").as_string(), "assistant");
  const std::vector<int64_t> prompt =
      tokenizer().encode("<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n", false);
  EXPECT_EQ(message.at("content").as_string(), greedy_text(prompt, 12));
  EXPECT_EQ(r.body.at("usage").at("prompt_tokens").as_int(), static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(r.body.at("usage").at("completion_tokens").as_int(), 12);
  // max_tokens is the older name of the same limit.
  const Reply old = chat(Object{{"messages", kHello}, {"max_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(old.body.at("choices")[0].at("message").at("content"), message.at("content"));
}

TEST_F(ServerApi, StreamedCompletionJoinsToTheWholeOne) {
  const Object request{{"prompt", "The old man said"}, {"max_tokens", 24}, {"temperature", 0}};
  Value streamed = request;
  streamed.set("stream", true);
  streamed.set("stream_options", Object{{"include_usage", true}});
  const Stream s = stream("/v1/completions", streamed);
  ASSERT_EQ(s.status, 200) << s.raw;
  ASSERT_TRUE(s.done) << s.raw;
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(streamed_text(s, "text"), completions(request).body.at("choices")[0].at("text").as_string());
  for (const Value& e : s.events) {
    EXPECT_EQ(e.at("object").as_string(), "text_completion");
    EXPECT_EQ(e.at("id"), s.events[0].at("id"));
  }
  // Every chunk carries "usage": null but the last, which has no choices and the usage.
  const Value& last_choice = s.events[s.events.size() - 2].at("choices")[0];
  EXPECT_EQ(last_choice.at("finish_reason").as_string(), "length");
  EXPECT_TRUE(s.events[0].at("usage").is_null());
  const Value& usage_chunk = s.events.back();
  EXPECT_EQ(usage_chunk.at("choices").size(), 0u);
  EXPECT_EQ(usage_chunk.at("usage").at("completion_tokens").as_int(), 24);
}

TEST_F(ServerApi, StreamedChatOpensWithTheRoleAndClosesWithTheReason) {
  const Object request{{"messages", kHello}, {"max_tokens", 12}, {"temperature", 0}};
  Value streamed = request;
  streamed.set("stream", true);
  const Stream s = stream("/v1/chat/completions", streamed);
  ASSERT_EQ(s.status, 200) << s.raw;
  ASSERT_TRUE(s.done) << s.raw;
  EXPECT_EQ(s.events.front().at("object").as_string(), "chat.completion.chunk");
  EXPECT_EQ(s.events.front().at("choices")[0].at("delta").at("role").as_string(), "assistant");
  const Value& last = s.events.back().at("choices")[0];
  EXPECT_EQ(last.at("delta"), Value(Object{}));
  EXPECT_EQ(last.at("finish_reason").as_string(), "length");
  EXPECT_EQ(streamed_text(s, "delta"),
            chat(request).body.at("choices")[0].at("message").at("content").as_string());
  for (const Value& e : s.events) EXPECT_FALSE(e.contains("usage")) << "usage was not asked for";
}

TEST_F(ServerApi, StopStringEndsTheText) {
  const Object request{{"prompt", "The old man said"}, {"max_tokens", 24}, {"temperature", 0}};
  const std::string whole = completions(request).body.at("choices")[0].at("text").as_string();
  // The third word of the answer, wherever it first appears.
  size_t from = 0;
  for (int i = 0; i < 3; ++i) from = whole.find(' ', from + 1);
  const std::string stop = whole.substr(from, whole.find(' ', from + 1) - from);
  ASSERT_FALSE(stop.empty()) << whole;
  Value stopped = request;
  stopped.set("stop", Array{"never in the text", stop});
  const Reply r = completions(stopped);
  ASSERT_EQ(r.status, 200) << json::dump(r.body);
  EXPECT_EQ(r.body.at("choices")[0].at("text").as_string(), whole.substr(0, whole.find(stop)));
  EXPECT_EQ(r.body.at("choices")[0].at("finish_reason").as_string(), "stop");
  stopped.set("stream", true);
  const Stream s = stream("/v1/completions", stopped);
  EXPECT_EQ(streamed_text(s, "text"), whole.substr(0, whole.find(stop)));
  EXPECT_EQ(s.events.back().at("choices")[0].at("finish_reason").as_string(), "stop");
}

TEST_F(ServerApi, SeededChoicesRepeatAndDifferFromEachOther) {
  const Object request{{"prompt", "The old man said"},
                       {"max_tokens", 16},
                       {"temperature", 1.0},
                       {"top_p", 0.95},
                       {"seed", 7},
                       {"n", 3}};
  const Reply a = completions(request);
  const Reply b = completions(request);
  ASSERT_EQ(a.status, 200) << json::dump(a.body);
  ASSERT_EQ(a.body.at("choices").size(), 3u);
  EXPECT_EQ(a.body.at("choices"), b.body.at("choices"));
  std::set<std::string> texts;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a.body.at("choices")[i].at("index").as_int(), static_cast<int64_t>(i));
    texts.insert(a.body.at("choices")[i].at("text").as_string());
  }
  EXPECT_GT(texts.size(), 1u) << "the choices of one request draw their own numbers";
  EXPECT_EQ(a.body.at("usage").at("completion_tokens").as_int(), 48);
}

TEST_F(ServerApi, CompletionLogprobsDescribeEachToken) {
  const Reply r = completions(
      Object{{"prompt", "The old man said"}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}});
  ASSERT_EQ(r.status, 200) << json::dump(r.body);
  const Value& choice = r.body.at("choices")[0];
  const Value& lp = choice.at("logprobs");
  ASSERT_EQ(lp.at("tokens").size(), 8u);
  std::string joined;
  for (size_t i = 0; i < 8; ++i) {
    joined += lp.at("tokens")[i].as_string();
    const Value& top = lp.at("top_logprobs")[i];
    ASSERT_GE(top.size(), 1u);
    ASSERT_LE(top.size(), 3u);
    // Greedy: the chosen token is the most likely one.
    double best = -1e9;
    for (const auto& [token, logprob] : top.as_object()) best = std::max(best, logprob.as_double());
    EXPECT_DOUBLE_EQ(lp.at("token_logprobs")[i].as_double(), best);
    EXPECT_LE(best, 0.0);
    EXPECT_EQ(lp.at("text_offset")[i].as_int(),
              static_cast<int64_t>(joined.size() - lp.at("tokens")[i].as_string().size()));
  }
  EXPECT_EQ(joined, choice.at("text").as_string());
}

TEST_F(ServerApi, ChatLogprobsDescribeEachToken) {
  const Reply r = chat(Object{
      {"messages", kHello}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}});
  ASSERT_EQ(r.status, 200) << json::dump(r.body);
  const Value& content = r.body.at("choices")[0].at("logprobs").at("content");
  ASSERT_EQ(content.size(), 6u);
  for (const Value& token : content.as_array()) {
    ASSERT_EQ(token.at("top_logprobs").size(), 2u);
    EXPECT_EQ(token.at("top_logprobs")[0].at("logprob"), token.at("logprob"));
    EXPECT_GE(token.at("logprob").as_double(), token.at("top_logprobs")[1].at("logprob").as_double());
    EXPECT_EQ(token.at("bytes").size(), token.at("token").as_string().size());
  }
  // Without top_logprobs, only the chosen tokens'.
  const Reply plain = chat(Object{{"messages", kHello}, {"max_tokens", 2}, {"logprobs", true}});
  EXPECT_EQ(plain.body.at("choices")[0].at("logprobs").at("content")[0].at("top_logprobs").size(), 0u);
}

TEST_F(ServerApi, PenaltiesSteerAwayFromRepeats) {
  // The demo model left to itself repeats phrases; penalties on what was generated change its course.
  const Object request{{"prompt", "The old man said"}, {"max_tokens", 40}, {"temperature", 0}};
  const std::string plain = completions(request).body.at("choices")[0].at("text").as_string();
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    Value penalized = request;
    penalized.set(penalty, 2.0);
    const Reply r = completions(penalized);
    ASSERT_EQ(r.status, 200) << json::dump(r.body);
    EXPECT_NE(r.body.at("choices")[0].at("text").as_string(), plain) << penalty;
  }
}

TEST_F(ServerApi, ModelsHealthAndMetrics) {
  auto c = client();
  const Reply models = to_reply(c.Get("/v1/models"));
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body.at("object").as_string(), "list");
  EXPECT_EQ(models.body.at("data")[0].at("id").as_string(), kModelName);
  EXPECT_EQ(to_reply(c.Get("/v1/models/tfm-demo")).body.at("id").as_string(), kModelName);
  EXPECT_EQ(to_reply(c.Get("/v1/models/gpt-4")).status, 404);
  EXPECT_EQ(to_reply(c.Get("/health")).status, 200);
  completions(Object{{"prompt", "The old man said"}, {"max_tokens", 4}});
  const std::string m = metrics_text(c);
  for (const char* name :
       {"tfm_requests_waiting", "tfm_requests_running", "tfm_kv_cache_blocks_used",
        "tfm_kv_cache_blocks_free", "tfm_prefix_cache_hit_rate", "tfm_generation_tokens_total",
        "tfm_time_to_first_token_seconds_count", "tfm_inter_token_latency_seconds_count"}) {
    EXPECT_GE(metric(m, name), 0) << name << " missing from\n" << m;
  }
  EXPECT_GE(metric(m, "tfm_generation_tokens_total"), 4);
  EXPECT_GE(metric(m, "tfm_time_to_first_token_seconds_count"), 1);
  EXPECT_GE(metric(m, "tfm_inter_token_latency_seconds_count"), 3);
  EXPECT_NE(m.find("tfm_time_to_first_token_seconds_bucket{le=\"+Inf\"}"), std::string::npos);
}

void expect_error(const Reply& r, int status, const std::string& type, const std::string& param,
                  const std::string& code) {
  ASSERT_EQ(r.status, status) << json::dump(r.body);
  const Value& e = error_of(r);
  EXPECT_FALSE(e.at("message").as_string().empty());
  EXPECT_EQ(e.at("type").as_string(), type);
  EXPECT_EQ(e.at("param").is_null() ? "" : e.at("param").as_string(), param);
  EXPECT_EQ(e.at("code").is_null() ? "" : e.at("code").as_string(), code);
}

TEST_F(ServerApi, MalformedJsonIs400) {
  auto c = client();
  expect_error(post(c, "/v1/completions", std::string("{\"prompt\": ")), 400, "invalid_request_error", "",
               "");
  expect_error(post(c, "/v1/chat/completions", std::string("[1, 2]")), 400, "invalid_request_error", "", "");
  expect_error(post(c, "/v1/chat/completions", std::string("")), 400, "invalid_request_error", "", "");
}

TEST_F(ServerApi, WrongFieldTypesAre400NamingTheField) {
  expect_error(completions(Object{{"prompt", "x"}, {"max_tokens", "a"}}), 400, "invalid_request_error",
               "max_tokens", "invalid_type");
  expect_error(completions(Object{{"prompt", 3.5}}), 400, "invalid_request_error", "prompt", "invalid_type");
  expect_error(chat(Object{{"messages", "hello"}}), 400, "invalid_request_error", "messages", "invalid_type");
  expect_error(chat(Object{{"messages", Array{Object{{"content", "hi"}}}}}), 400, "invalid_request_error",
               "messages[0].role", "missing_required_parameter");
  expect_error(chat(Object{{"messages", kHello}, {"temperature", "hot"}}), 400, "invalid_request_error",
               "temperature", "invalid_type");
  expect_error(chat(Object{{"messages", kHello}, {"stream", "yes"}}), 400, "invalid_request_error", "stream",
               "invalid_type");
  expect_error(chat(Object{{"messages", kHello}, {"temperature", 3}}), 400, "invalid_request_error",
               "temperature", "invalid_value");
  expect_error(chat(Object{{"messages", kHello}, {"stop", Array{1}}}), 400, "invalid_request_error",
               "stop[0]", "invalid_type");
  expect_error(chat(Object{{"messages", kHello}, {"top_logprobs", 2}}), 400, "invalid_request_error",
               "top_logprobs", "invalid_value");
  expect_error(chat(Object{{"messages", kHello}, {"stream_options", Object{{"include_usage", true}}}}), 400,
               "invalid_request_error", "stream_options", "invalid_value");
  expect_error(chat(Object{{"messages", kHello}, {"best_of", 2}}), 400, "invalid_request_error", "best_of",
               "unrecognized_argument");
  expect_error(chat(Object{{"prompt", "hi"}}), 400, "invalid_request_error", "messages",
               "missing_required_parameter");
}

TEST_F(ServerApi, UnknownModelIs404) {
  expect_error(chat(Object{{"model", "gpt-4"}, {"messages", kHello}}), 404, "invalid_request_error", "model",
               "model_not_found");
}

TEST_F(ServerApi, PromptLongerThanTheContextIs400) {
  Array long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt.push_back(int64_t{100 + i % 50});  // the demo's context is 512
  expect_error(completions(Object{{"prompt", long_prompt}}), 400, "invalid_request_error", "prompt",
               "context_length_exceeded");
  // A prompt that fits, with a completion that does not.
  expect_error(completions(Object{{"prompt", "The old man said"}, {"max_tokens", 600}}), 400,
               "invalid_request_error", "prompt", "context_length_exceeded");
  Array outside;
  outside.push_back(int64_t{1} << 40);
  expect_error(completions(Object{{"prompt", outside}}), 400, "invalid_request_error", "", "");
}

TEST_F(ServerApi, UnknownPathIs404InTheSameShape) {
  auto c = client();
  const Reply r = to_reply(c.Get("/v1/engines"));
  ASSERT_EQ(r.status, 404);
  EXPECT_FALSE(error_of(r).at("message").as_string().empty());
}

TEST_F(ServerApi, DisconnectingMidStreamCancelsTheRequest) {
  auto c = client();
  const double generated_before = metric(metrics_text(c), "tfm_generation_tokens_total");
  const std::string aborted = "tfm_requests_finished_total{finish_reason=\"abort\"}";
  const double aborted_before = std::max(0.0, metric(metrics_text(c), aborted));
  const Value request =
      Object{{"prompt", "The old man said"}, {"max_tokens", 480}, {"temperature", 0}, {"stream", true}};
  auto streaming = client();
  const Stream s = post_stream(streaming, "/v1/completions", request,
                               [](const std::vector<Value>& events) { return events.size() < 3; });
  EXPECT_FALSE(s.done);
  EXPECT_EQ(wait_for_metric(c, aborted, aborted_before + 1), aborted_before + 1) << metrics_text(c);
  const std::string m = metrics_text(c);
  EXPECT_EQ(metric(m, "tfm_requests_running"), 0);
  EXPECT_EQ(metric(m, "tfm_kv_cache_blocks_used"), 0);
  EXPECT_LT(metric(m, "tfm_generation_tokens_total") - generated_before, 480) << "the request ran to its end";
}

TEST(ServerAuth, ApiKeyGuardsTheApiButNotHealthOrMetrics) {
  ServerConfig config;
  config.api_key = "sk-test-123";
  LiveServer server(config);
  auto c = server.client();
  const Object request{{"prompt", "Hi"}, {"max_tokens", 2}};
  expect_error(post(c, "/v1/completions", request), 401, "invalid_request_error", "", "");
  expect_error(post(c, "/v1/completions", request, {{"Authorization", "Bearer sk-wrong"}}), 401,
               "invalid_request_error", "", "invalid_api_key");
  expect_error(post(c, "/v1/completions", request, {{"Authorization", "sk-test-123"}}), 401,
               "invalid_request_error", "", "");
  EXPECT_EQ(to_reply(c.Get("/v1/models")).status, 401);
  EXPECT_EQ(post(c, "/v1/completions", request, {{"Authorization", "Bearer sk-test-123"}}).status, 200);
  EXPECT_EQ(to_reply(c.Get("/health")).status, 200);
  EXPECT_EQ(c.Get("/metrics")->status, 200);
}

TEST(ServerShutdown, RequestsInFlightFinishAndNewOnesAreRefused) {
  LiveServer server;
  auto c = server.client();
  const Stream s = stream_interrupted(
      server.port(), "/v1/completions",
      Object{{"prompt", "The old man said"}, {"max_tokens", 120}, {"temperature", 0}, {"stream", true}}, 1,
      [&] { server.http().shutdown(); });
  ASSERT_TRUE(s.done) << s.raw;
  EXPECT_FALSE(s.events.back().at("choices")[0].at("finish_reason").is_null());
  EXPECT_FALSE(streamed_text(s, "text").empty());
  EXPECT_EQ(to_reply(c.Get("/health")).status, 0) << "the server still accepts connections";
}

TEST(ServerShutdown, RequestsPastTheGracePeriodEndWithAnError) {
  ServerConfig config;
  config.shutdown_grace = std::chrono::milliseconds(0);
  LiveServer server(config);
  const Stream s = stream_interrupted(
      server.port(), "/v1/completions",
      Object{{"prompt", "The old man said"}, {"max_tokens", 480}, {"temperature", 0}, {"stream", true}}, 1,
      [&] { server.http().shutdown(); });
  ASSERT_TRUE(s.done) << s.raw;
  ASSERT_TRUE(s.events.back().contains("error")) << s.raw;
  EXPECT_EQ(s.events.back().at("error").at("type").as_string(), "server_error");
}

}  // namespace
}  // namespace tfm::server::test
