// The scheduler alone, with no model: token budgets, chunked prompts, decode steps, prefix hits, preemption
// and the policies, and a long random run that checks every block is accounted for.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tfm/core/error.h"
#include "tfm/engine/scheduler.h"

namespace tfm {
namespace {

constexpr int64_t kBlock = 4;

Request request(RequestId id, std::vector<int64_t> prompt, int priority = 0) {
  Request r;
  r.id = id;
  r.prompt_length = static_cast<int64_t>(prompt.size());
  r.tokens = std::move(prompt);
  r.priority = priority;
  return r;
}

std::vector<int64_t> range(int64_t first, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

// The position of the token a sampling chunk chooses.
int64_t sampled_position(const ScheduledChunk& c) {
  return c.start + static_cast<int64_t>(c.tokens.size());
}

// Runs a plan as the engine would: every sampling chunk gets token 1000 + its request id.
void run_plan(Scheduler& s, const SchedulerOutput& plan) {
  s.update(plan);
  for (const ScheduledChunk& c : plan.chunks)
    if (c.sample && s.find(c.id)) s.resolve(c.id, sampled_position(c), 1000 + static_cast<int64_t>(c.id));
}

std::map<RequestId, int64_t> chunk_sizes(const SchedulerOutput& plan) {
  std::map<RequestId, int64_t> sizes;
  for (const ScheduledChunk& c : plan.chunks) sizes[c.id] = static_cast<int64_t>(c.tokens.size());
  return sizes;
}

TEST(Scheduler, FillsTheTokenBudgetChunkingPromptsAndRunsDecodesFirst) {
  BlockPool pool(64);
  Scheduler s({.max_batch_tokens = 16, .prefix_caching = false}, pool, kBlock);
  s.add(request(1, range(0, 10)));
  s.add(request(2, range(100, 10)));
  s.add(request(3, range(200, 10)));
  SchedulerOutput p = s.schedule();
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{1, 10}, {2, 6}}));
  EXPECT_TRUE(p.chunks[0].sample);
  EXPECT_FALSE(p.chunks[1].sample);  // request 2's prompt continues next step
  EXPECT_EQ(p.chunks[1].start, 0);
  run_plan(s, p);
  EXPECT_EQ(s.find(1)->tokens.back(), 1001);
  p = s.schedule();  // request 1 decodes, request 2 finishes its prompt, request 3 starts
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{1, 1}, {2, 4}, {3, 10}}));
  EXPECT_EQ(p.chunks[1].start, 6);
  EXPECT_EQ(p.chunks[0].tokens, std::vector<int64_t>{1001});
  run_plan(s, p);
  p = s.schedule();
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(p.num_tokens, 3);
}

TEST(Scheduler, CapsPrefillChunksAndRunningRequests) {
  BlockPool pool(64);
  Scheduler s({.max_batch_tokens = 100, .max_num_seqs = 2, .max_prefill_chunk = 8, .prefix_caching = false}, pool,
              kBlock);
  for (RequestId id = 1; id <= 3; ++id) s.add(request(id, range(0, 20)));
  SchedulerOutput p = s.schedule();
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{1, 8}, {2, 8}}));
  EXPECT_EQ(s.stats().waiting, 1);
  EXPECT_EQ(s.stats().running, 2);
}

TEST(Scheduler, BlocksCoverTheComputedTokensAndReturnWhenFinished) {
  BlockPool pool(8);
  Scheduler s({.prefix_caching = false}, pool, kBlock);
  s.add(request(1, range(0, 9)));  // 9 tokens: 3 blocks
  SchedulerOutput p = s.schedule();
  EXPECT_EQ(p.chunks[0].blocks.size(), 3u);
  EXPECT_EQ(pool.num_free(), 5);
  run_plan(s, p);
  s.finish(1);
  EXPECT_EQ(pool.num_free(), 8);
  EXPECT_EQ(s.find(1), nullptr);
  EXPECT_FALSE(s.has_unfinished());
}

TEST(Scheduler, ReusesTheFullBlocksOfACommonPrefix) {
  BlockPool pool(32);
  Scheduler s({}, pool, kBlock);
  std::vector<int64_t> shared = range(0, 10);  // two full blocks and two tokens
  std::vector<int64_t> a = shared, b = shared;
  a.push_back(50);
  b.insert(b.end(), {60, 61, 62});
  s.add(request(1, a));
  SchedulerOutput p = s.schedule();
  run_plan(s, p);
  s.add(request(2, b));
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  const ScheduledChunk& second = p.chunks[1];
  EXPECT_EQ(second.start, 8);  // blocks 0 and 1 came from request 1
  EXPECT_EQ(second.tokens.size(), 5u);
  EXPECT_EQ(std::vector<int32_t>(second.blocks.begin(), second.blocks.begin() + 2),
            std::vector<int32_t>(p.chunks[0].blocks.begin(), p.chunks[0].blocks.begin() + 2));
  EXPECT_EQ(pool.ref_count(second.blocks[0]), 2);
  EXPECT_EQ(s.stats().prefix_hits, 2);
  // A prompt that is all cached blocks still computes its last token.
  s.finish(1);
  s.finish(2);
  s.add(request(3, range(0, 8)));
  p = s.schedule();
  EXPECT_EQ(p.chunks[0].start, 4);
  EXPECT_EQ(p.chunks[0].tokens.size(), 4u);
}

// Asynchronous batching plans a step before the token of the step before is read: it is kPendingToken, the last
// of the request's chunk, until resolve() replaces it, and a block it completes is keyed for prefix caching
// only then.
TEST(Scheduler, PlansAheadOfPendingTokensAndKeysTheirBlocksOnceResolved) {
  BlockPool pool(32);
  Scheduler s({}, pool, kBlock);
  s.add(request(1, range(0, 3)));
  const SchedulerOutput first = s.schedule();
  s.update(first);
  EXPECT_EQ(s.find(1)->tokens.back(), kPendingToken);
  const SchedulerOutput second = s.schedule();
  ASSERT_EQ(second.chunks.size(), 1u);
  EXPECT_EQ(second.chunks[0].start, 3);
  EXPECT_EQ(second.chunks[0].tokens, std::vector<int64_t>{kPendingToken});
  s.update(second);  // block 0 (positions 0 to 3) is computed, its last token unknown
  EXPECT_EQ(s.find(1)->tokens, (std::vector<int64_t>{0, 1, 2, kPendingToken, kPendingToken}));
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_THROW(s.resolve(1, 2, 40), Error);  // not pending
  s.resolve(1, sampled_position(first.chunks[0]), 40);
  EXPECT_EQ(pool.num_cached(), 1);
  s.resolve(1, sampled_position(second.chunks[0]), 41);
  EXPECT_EQ(s.find(1)->tokens, (std::vector<int64_t>{0, 1, 2, 40, 41}));
  // A later request with that block's tokens finds it.
  s.add(request(2, {0, 1, 2, 40, 9}));
  const SchedulerOutput third = s.schedule();
  ASSERT_EQ(third.chunks.size(), 2u);
  EXPECT_EQ(third.chunks[1].start, 4);
}

TEST(Scheduler, AFreedBlockStaysCachedUntilItIsHandedOutAgain) {
  BlockPool pool(4);
  Scheduler s({}, pool, kBlock);
  s.add(request(1, range(0, 9)));
  SchedulerOutput p = s.schedule();
  run_plan(s, p);
  s.finish(1);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_cached(), 2);
  s.add(request(2, range(0, 9)));
  p = s.schedule();
  EXPECT_EQ(p.chunks[0].start, 8);  // both cached blocks reused after their request finished
  run_plan(s, p);
  s.finish(2);
  s.add(request(3, range(500, 16)));  // needs all four blocks: the cached ones are evicted
  p = s.schedule();
  EXPECT_EQ(p.chunks[0].start, 0);
  EXPECT_EQ(pool.num_cached(), 0);
  run_plan(s, p);
  s.finish(3);
  s.add(request(4, range(0, 9)));
  EXPECT_EQ(s.schedule().chunks[0].start, 0);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOutAndComputesItAgainLater) {
  BlockPool pool(6);
  Scheduler s({.prefix_caching = false}, pool, kBlock);
  s.add(request(1, range(0, 8)));
  s.add(request(2, range(100, 8)));
  SchedulerOutput p = s.schedule();  // 2 blocks each, 2 free
  run_plan(s, p);
  // Decoding: each request needs a third block (the last two free), then a fourth, which only preemption
  // can give.
  for (int step = 0; step < 10 && s.stats().preemptions == 0; ++step) {
    p = s.schedule();
    run_plan(s, p);
  }
  const SchedulerStats st = s.stats();
  EXPECT_GE(st.preemptions, 1);
  EXPECT_EQ(s.find(2)->num_preemptions, 1);
  EXPECT_EQ(s.find(1)->num_preemptions, 0);
  // Request 2 kept every token it generated; once request 1 finishes it is computed again from the start.
  const std::vector<int64_t> tokens2 = s.find(2)->tokens;
  s.finish(1);
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 0);
  EXPECT_EQ(p.chunks[0].tokens, tokens2);
  EXPECT_TRUE(p.chunks[0].sample);
}

// A pool that can grow is asked to, for what the request lacks, before anything is preempted.
TEST(Scheduler, AsksToGrowThePoolBeforePreempting) {
  BlockPool pool(2);
  std::vector<int64_t> asked;
  Scheduler s({.prefix_caching = false}, pool, kBlock, [&](int64_t need) {
    asked.push_back(need);
    pool.grow(pool.num_blocks() + static_cast<int32_t>(need));
  });
  s.add(request(1, range(0, 8)));
  s.add(request(2, range(100, 8)));
  SchedulerOutput p = s.schedule();
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{1, 8}, {2, 8}}));
  EXPECT_EQ(asked, std::vector<int64_t>{2});  // request 1 took the two blocks there were
  run_plan(s, p);
  p = s.schedule();  // each needs a third block
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{1, 1}, {2, 1}}));
  EXPECT_TRUE(p.preempted.empty());
  EXPECT_EQ(asked, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(pool.num_blocks(), 6);
}

TEST(Scheduler, PriorityPolicyAdmitsAndPreemptsByPriority) {
  BlockPool pool(64);
  Scheduler s({.max_batch_tokens = 8, .policy = SchedulingPolicy::priority, .prefix_caching = false}, pool,
              kBlock);
  s.add(request(1, range(0, 8), 5));
  s.add(request(2, range(0, 8), 1));
  s.add(request(3, range(0, 8), 3));
  std::vector<RequestId> order;
  while (s.has_unfinished() && order.size() < 3) {
    SchedulerOutput p = s.schedule();
    for (const ScheduledChunk& c : p.chunks)
      if (c.start == 0) order.push_back(c.id);
    run_plan(s, p);
  }
  EXPECT_EQ(order, (std::vector<RequestId>{2, 3, 1}));
}

TEST(Scheduler, PrefillFirstAdmitsWaitingRequestsBeforeDecodes) {
  BlockPool pool(64);
  Scheduler s({.max_batch_tokens = 8, .policy = SchedulingPolicy::prefill_first, .prefix_caching = false}, pool,
              kBlock);
  s.add(request(1, range(0, 4)));
  SchedulerOutput p = s.schedule();
  run_plan(s, p);
  s.add(request(2, range(10, 8)));
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);  // the new prompt took the whole budget
  EXPECT_EQ(p.chunks[0].id, 2u);
}

TEST(Scheduler, RefusesDuplicateAndEmptyRequests) {
  BlockPool pool(4);
  Scheduler s({}, pool, kBlock);
  s.add(request(1, range(0, 3)));
  EXPECT_THROW(s.add(request(1, range(0, 3))), Error);
  EXPECT_THROW(s.add(request(2, {})), Error);
  EXPECT_THROW(Scheduler({.max_batch_tokens = 0}, pool, kBlock), Error);
}

// Many requests of random lengths through a small pool, with random cancellations and a shared system
// prompt: every request ends with all its tokens, a block's count always equals the requests holding it, and
// nothing is left in use.
TEST(Scheduler, ARandomRunAccountsForEveryBlock) {
  for (const SchedulingPolicy policy :
       {SchedulingPolicy::fifo, SchedulingPolicy::priority, SchedulingPolicy::prefill_first}) {
    std::mt19937 rng(static_cast<unsigned>(policy) + 1);
    BlockPool pool(40);
    Scheduler s({.max_batch_tokens = 24, .max_num_seqs = 6, .max_prefill_chunk = 10, .policy = policy}, pool,
                kBlock);
    std::map<RequestId, int64_t> target;  // total tokens at which each request is done
    RequestId next = 1;
    int steps = 0;
    while ((next <= 60 || s.has_unfinished()) && steps < 10000) {
      ++steps;
      if (next <= 60 && rng() % 3 == 0) {
        std::vector<int64_t> prompt = range(0, 5);  // the shared prefix
        const int64_t extra = 1 + rng() % 30;
        for (int64_t i = 0; i < extra; ++i) prompt.push_back(rng() % 50);
        target[next] = static_cast<int64_t>(prompt.size()) + 1 + rng() % 20;
        s.add(request(next, prompt, static_cast<int>(rng() % 4)));
        ++next;
      }
      SchedulerOutput p = s.schedule();
      // Every block of a running request is counted once per request that holds it.
      std::map<int32_t, int32_t> holders;
      for (const ScheduledChunk& c : p.chunks) {
        EXPECT_GE(static_cast<int64_t>(c.blocks.size()) * kBlock, c.start + static_cast<int64_t>(c.tokens.size()));
        for (int32_t b : c.blocks) ++holders[b];
      }
      for (const auto& [b, n] : holders) EXPECT_LE(n, pool.ref_count(b));
      run_plan(s, p);
      for (const ScheduledChunk& c : p.chunks) {
        const Request* r = s.find(c.id);
        if (r && static_cast<int64_t>(r->tokens.size()) >= target[c.id]) s.finish(c.id);
      }
      if (rng() % 50 == 0 && next > 1) s.finish(1 + rng() % (next - 1));  // a cancellation
    }
    EXPECT_FALSE(s.has_unfinished()) << "stuck after " << steps << " steps";
    EXPECT_EQ(pool.num_free(), pool.num_blocks());
  }
}

}  // namespace
}  // namespace tfm
