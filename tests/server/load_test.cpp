// 128 clients at once, bounded: every answer is complete and, on the CPU in float32, token for token what the
// same request gets when it is served alone, whether it shared steps, hit the prefix cache or was preempted;
// afterwards no KV block is in use.
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "live_server.h"

namespace tfm::server::test {
namespace {

using json::Array;
using json::Object;
using json::Value;

struct Outcome {
  std::string text;
  std::vector<std::string> tokens;  // from the log probabilities
  std::string finish_reason;
  int64_t completion_tokens = -1;
  bool complete = false;  // a status of 200 and, for a stream, its [DONE]
  std::string failure;    // what the server said when it was not
};

struct Case {
  bool chat = false;
  bool stream = false;
  Value body;
};

// Long shared openings, so that requests find each other's blocks in the prefix cache.
const char* const kOpenings[] = {
    "In the village by the river there lived an old man and his wife, who had no children and a small "
    "field. ",
    "The ship had been at sea for forty days when the captain called the crew together on the deck and said ",
};
const char* const kEndings[] = {"One day",         "The old man said", "Then",        "At night the wind",
                                "Nobody knew why", "She asked him",    "They walked", "In the morning"};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int i = 0; i < 32; ++i) {
    Case c;
    c.chat = i % 2 == 1;
    c.stream = (i / 2) % 2 == 1;
    const std::string prompt = std::string(kOpenings[(i / 8) % 2]) + kEndings[i % 8];
    Value body = Object{{"max_tokens", 8 + i % 13}};
    if (c.chat) {
      body.set("messages", Array{Object{{"role", "user"}, {"content", prompt}}});
      body.set("logprobs", true);
    } else {
      body.set("prompt", prompt);
      body.set("logprobs", 0);
    }
    // Half greedy, half sampled with a seed of their own.
    if ((i / 4) % 2 == 0) {
      body.set("temperature", 0);
    } else {
      body.set("temperature", 0.8);
      body.set("seed", 1000 + i);
    }
    if (c.stream) {
      body.set("stream", true);
      body.set("stream_options", Object{{"include_usage", true}});
    }
    c.body = std::move(body);
    out.push_back(std::move(c));
  }
  return out;
}

void add_choice(Outcome& o, const Value& choice, bool chat, bool stream) {
  if (chat) {
    const Value& message = choice.at(stream ? "delta" : "message");
    if (const Value* content = message.find("content")) o.text += content->as_string();
  } else {
    o.text += choice.at("text").as_string();
  }
  if (const Value& lp = choice.at("logprobs"); !lp.is_null()) {
    if (chat) {
      for (const Value& t : lp.at("content").as_array()) o.tokens.push_back(t.at("token").as_string());
    } else {
      for (const Value& t : lp.at("tokens").as_array()) o.tokens.push_back(t.as_string());
    }
  }
  if (const Value& reason = choice.at("finish_reason"); !reason.is_null())
    o.finish_reason = reason.as_string();
}

Outcome serve(const LiveServer& server, const Case& c) {
  auto client = server.client();
  const std::string path = c.chat ? "/v1/chat/completions" : "/v1/completions";
  Outcome o;
  if (c.stream) {
    const Stream s = post_stream(client, path, c.body);
    for (const Value& e : s.events) {
      if (e.contains("error")) o.failure = json::dump(e);
      if (!e.contains("choices")) continue;
      for (const Value& choice : e.at("choices").as_array()) add_choice(o, choice, c.chat, true);
      if (const Value* usage = e.find("usage"); usage && !usage->is_null()) {
        o.completion_tokens = usage->at("completion_tokens").as_int();
      }
    }
    o.complete = s.status == 200 && s.done && o.failure.empty();
    if (!o.complete && o.failure.empty()) o.failure = std::to_string(s.status) + " " + s.raw;
    return o;
  }
  const Reply r = post(client, path, c.body);
  o.complete = r.status == 200;
  if (!o.complete) {
    o.failure = std::to_string(r.status) + " " + json::dump(r.body);
    return o;
  }
  add_choice(o, r.body.at("choices")[0], c.chat, false);
  o.completion_tokens = r.body.at("usage").at("completion_tokens").as_int();
  return o;
}

// With the engine's asynchronous batching (the parameter) and without.
class ServerLoad : public testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(AsyncBatching, ServerLoad, testing::Bool());

TEST_P(ServerLoad, EveryConcurrentClientGetsWhatItGetsAlone) {
  // A small step budget and a cache too small for everyone at once: prompts are chunked, decodes mix with
  // prefills, and the newest requests are preempted and computed again.
  EngineConfig engine;
  engine.num_blocks = 160;
  engine.scheduler.max_batch_tokens = 256;
  engine.async_batching = GetParam();
  LiveServer server({}, engine);
  const std::vector<Case> distinct = cases();

  std::vector<Outcome> alone;
  for (const Case& c : distinct) {
    alone.push_back(serve(server, c));
    ASSERT_TRUE(alone.back().complete) << alone.back().failure;
  }

  constexpr int kClients = 128;
  std::vector<Outcome> together(kClients);
  std::latch go(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      go.arrive_and_wait();
      together[i] = serve(server, distinct[i % distinct.size()]);
    });
  }
  for (std::thread& t : clients) t.join();

  for (int i = 0; i < kClients; ++i) {
    const Outcome& want = alone[i % distinct.size()];
    const Outcome& got = together[i];
    SCOPED_TRACE("client " + std::to_string(i) + ": " + json::dump(distinct[i % distinct.size()].body));
    ASSERT_TRUE(got.complete) << got.failure;
    EXPECT_FALSE(got.finish_reason.empty());
    EXPECT_EQ(got.completion_tokens, static_cast<int64_t>(got.tokens.size()));
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.text, want.text);
    EXPECT_EQ(got.finish_reason, want.finish_reason);
  }

  auto c = server.client();
  EXPECT_EQ(wait_for_metric(c, "tfm_requests_running", 0), 0);
  const std::string m = metrics_text(c);
  EXPECT_EQ(metric(m, "tfm_requests_waiting"), 0) << m;
  EXPECT_EQ(metric(m, "tfm_kv_cache_blocks_used"), 0) << m;
  EXPECT_EQ(metric(m, "tfm_kv_cache_blocks_free"), 160) << m;
  EXPECT_GT(metric(m, "tfm_prefix_cache_hits_total"), 0) << m;
  EXPECT_GT(metric(m, "tfm_preemptions_total"), 0) << m;
}

}  // namespace
}  // namespace tfm::server::test
