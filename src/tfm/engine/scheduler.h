// The scheduler of continuous batching: which requests run in the next forward step and how many of their
// tokens each. There is no prefill or decode phase: each request has tokens (its prompt, then what it
// generated) of which the KV cache holds num_computed, and every step lets requests catch up under a token
// budget, so a long prompt is computed in chunks beside other requests' decode steps. The plan of a step is
// plain data (SchedulerOutput) that the model runner turns into a batch.
//
// KV blocks come from the model's BlockPool: a request's leading full blocks can be shared with earlier
// requests of the same prefix (prefix caching), and when blocks run out the scheduler preempts a running
// request (frees its blocks; it is computed again later) rather than failing.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "tfm/model/kv_cache.h"

namespace tfm {

using RequestId = uint64_t;

// The token a step chose for a request while that step is queued on the device and not read yet: the plan of
// the next step can be made before it is known (asynchronous batching), as it depends only on how many tokens
// each request has. Never computed into a prefix-cache key.
inline constexpr int64_t kPendingToken = -1;

enum class SchedulingPolicy {
  fifo,           // first come, first served; running requests before waiting ones
  priority,       // lower `priority` first (then first come); preemption takes the lowest priority first
  prefill_first,  // waiting requests are admitted before running ones continue (Transformers' prefill_first)
};

struct SchedulerConfig {
  int64_t max_batch_tokens = 8192;  // tokens computed per step (Transformers' default)
  int64_t max_num_seqs = 1024;      // requests running at once (Transformers' max_requests_per_batch cap)
  int64_t max_prefill_chunk = 0;    // tokens of one request per step; 0: up to the budget
  SchedulingPolicy policy = SchedulingPolicy::fifo;
  bool prefix_caching = true;
};

enum class RequestStatus { waiting, running, finished };

// A request as the scheduler tracks it.
struct Request {
  RequestId id = 0;
  std::vector<int64_t> tokens;  // the prompt, then each generated token (kPendingToken until it is read)
  int64_t prompt_length = 0;
  int priority = 0;
  uint64_t arrival = 0;        // admission order, set by the scheduler
  int64_t num_computed = 0;    // leading tokens whose keys and values are in the cache
  std::vector<int32_t> blocks;  // the block table
  int64_t num_keyed_blocks = 0;  // leading blocks registered for prefix caching
  RequestStatus status = RequestStatus::waiting;
  int64_t num_preemptions = 0;
};

// One request's share of a step.
struct ScheduledChunk {
  RequestId id = 0;
  std::vector<int64_t> tokens;  // the tokens to compute; only the last may be kPendingToken
  int64_t start = 0;            // position of tokens[0]
  std::vector<int32_t> blocks;  // the request's whole block table
  bool sample = false;          // the chunk reaches the request's last token: its logits choose the next
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // in batch order
  std::vector<RequestId> preempted;    // freed by this step, to be computed again
  int64_t num_tokens = 0;
};

struct SchedulerStats {
  int64_t waiting = 0, running = 0;
  int64_t blocks_used = 0, blocks_free = 0;
  int64_t prefix_queries = 0;  // prompt blocks looked up in the prefix cache
  int64_t prefix_hits = 0;     // of them, found
  int64_t preemptions = 0;
};

class Scheduler {
 public:
  // `grow`, when given, is asked first whenever a request needs more blocks than the pool has free (how many
  // it needs): it may grow the pool, and the scheduler preempts only if it did not.
  Scheduler(SchedulerConfig config, BlockPool& pool, int64_t block_size, std::function<void(int64_t)> grow = {});

  // A new request, waiting until a step has room for it. Its id must be new.
  void add(Request request);
  // Done with a request (finished or cancelled): its blocks return to the pool at once.
  void finish(RequestId id);
  const Request* find(RequestId id) const;

  // The next step's plan; empty when nothing can run.
  SchedulerOutput schedule();
  // After the step is queued: each chunk's tokens count as computed (later steps run after it), and each
  // request whose chunk samples gets a kPendingToken at the end of its tokens, for resolve() to replace.
  void update(const SchedulerOutput& plan);
  // The token the step chose for `id`, at `position` among its tokens (where update() put kPendingToken).
  void resolve(RequestId id, int64_t position, int64_t token);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  SchedulerStats stats() const;

 private:
  // Grows the request's block table to hold `tokens` tokens; false (and nothing taken) when the pool cannot.
  bool allocate(Request& r, int64_t tokens);
  // The leading full blocks of a new request's tokens found in the prefix cache, taken for it.
  void take_cached_prefix(Request& r);
  // Registers the request's newly computed full blocks for prefix caching.
  void key_full_blocks(Request& r);
  void free_blocks(Request& r);
  void preempt(RequestId id);
  // The running request to preempt when blocks run out, one not in `scheduled`.
  RequestId victim(const std::set<RequestId>& scheduled) const;
  // The position in waiting_ where a request goes by the policy.
  std::deque<RequestId>::iterator waiting_slot(const Request& r);

  SchedulerConfig config_;
  BlockPool& pool_;
  int64_t block_size_;
  std::function<void(int64_t)> grow_;
  uint64_t next_arrival_ = 0;
  std::map<RequestId, Request> requests_;
  std::deque<RequestId> waiting_;
  std::vector<RequestId> running_;  // in admission order
  SchedulerStats counters_;
};

}  // namespace tfm
