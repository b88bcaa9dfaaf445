#include "tfm/engine/scheduler.h"

#include <algorithm>
#include <set>
#include <utility>

#include "tfm/core/error.h"

namespace tfm {

Scheduler::Scheduler(SchedulerConfig config, BlockPool& pool, int64_t block_size,
                     std::function<void(int64_t)> grow)
    : config_(config), pool_(pool), block_size_(block_size), grow_(std::move(grow)) {
  check(config_.max_batch_tokens > 0, "scheduler: max_batch_tokens must be positive, got ", config_.max_batch_tokens);
  check(config_.max_num_seqs > 0, "scheduler: max_num_seqs must be positive, got ", config_.max_num_seqs);
  check(config_.max_prefill_chunk >= 0, "scheduler: max_prefill_chunk must not be negative");
  check(block_size_ > 0, "scheduler: block_size must be positive, got ", block_size_);
}

void Scheduler::add(Request request) {
  check(!requests_.count(request.id), "scheduler: request ", request.id, " was added twice");
  check(!request.tokens.empty(), "scheduler: request ", request.id, " has no tokens");
  request.arrival = next_arrival_++;
  request.status = RequestStatus::waiting;
  request.num_computed = 0;
  request.num_keyed_blocks = 0;
  request.blocks.clear();
  const RequestId id = request.id;
  const Request& r = requests_.emplace(id, std::move(request)).first->second;
  waiting_.insert(waiting_slot(r), id);
}

std::deque<RequestId>::iterator Scheduler::waiting_slot(const Request& r) {
  if (config_.policy != SchedulingPolicy::priority) return waiting_.end();
  return std::find_if(waiting_.begin(), waiting_.end(), [&](RequestId other) {
    const Request& o = requests_.at(other);
    return std::tie(r.priority, r.arrival) < std::tie(o.priority, o.arrival);
  });
}

void Scheduler::finish(RequestId id) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::erase(running_, id);
  std::erase(waiting_, id);
  free_blocks(it->second);
  requests_.erase(it);
}

const Request* Scheduler::find(RequestId id) const {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

bool Scheduler::allocate(Request& r, int64_t tokens) {
  const int64_t need = blocks_for(tokens, block_size_) - static_cast<int64_t>(r.blocks.size());
  if (need <= 0) return true;
  if (need > pool_.num_free() && grow_) grow_(need);
  if (need > pool_.num_free()) return false;
  for (int64_t i = 0; i < need; ++i) r.blocks.push_back(*pool_.allocate());
  return true;
}

void Scheduler::free_blocks(Request& r) {
  // The last blocks first: shared prefixes, freed last, stay cached the longest.
  for (auto b = r.blocks.rbegin(); b != r.blocks.rend(); ++b) pool_.release(*b);
  r.blocks.clear();
  r.num_computed = 0;
  r.num_keyed_blocks = 0;
}

void Scheduler::take_cached_prefix(Request& r) {
  if (!config_.prefix_caching) return;
  // At least the last token is computed, so that its logits can choose the next.
  const int64_t candidates = (static_cast<int64_t>(r.tokens.size()) - 1) / block_size_;
  counters_.prefix_queries += candidates;
  BlockKey key;
  for (int64_t i = 0; i < candidates; ++i) {
    const auto first = r.tokens.begin() + i * block_size_;
    key.tokens.assign(first, first + block_size_);
    const std::optional<int32_t> block = pool_.acquire_cached(key);
    if (!block) break;
    r.blocks.push_back(*block);
    key.parent = *block;
    key.parent_generation = pool_.generation(*block);
  }
  counters_.prefix_hits += static_cast<int64_t>(r.blocks.size());
  r.num_keyed_blocks = static_cast<int64_t>(r.blocks.size());
  r.num_computed = r.num_keyed_blocks * block_size_;
}

void Scheduler::key_full_blocks(Request& r) {
  if (!config_.prefix_caching) return;
  const int64_t full = r.num_computed / block_size_;
  for (; r.num_keyed_blocks < full; ++r.num_keyed_blocks) {
    const int64_t i = r.num_keyed_blocks;
    BlockKey key;
    if (i > 0) {
      key.parent = r.blocks[static_cast<size_t>(i - 1)];
      key.parent_generation = pool_.generation(key.parent);
    }
    const auto first = r.tokens.begin() + i * block_size_;
    key.tokens.assign(first, first + block_size_);
    // A block computed from a token still pending is keyed when resolve() knows the token.
    if (std::find(key.tokens.begin(), key.tokens.end(), kPendingToken) != key.tokens.end()) return;
    pool_.set_key(r.blocks[static_cast<size_t>(i)], std::move(key));
  }
}

void Scheduler::preempt(RequestId id) {
  Request& r = requests_.at(id);
  free_blocks(r);
  r.status = RequestStatus::waiting;
  ++r.num_preemptions;
  ++counters_.preemptions;
  std::erase(running_, id);
  // Ahead of later arrivals: it waited once already.
  waiting_.insert(config_.policy == SchedulingPolicy::priority ? waiting_slot(r) : waiting_.begin(), id);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_batch_tokens;
  std::set<RequestId> scheduled;
  auto chunk_size = [&](const Request& r) {
    int64_t n = std::min(static_cast<int64_t>(r.tokens.size()) - r.num_computed, budget);
    if (config_.max_prefill_chunk > 0) n = std::min(n, config_.max_prefill_chunk);
    return n;
  };
  auto emit = [&](const Request& r, int64_t n) {
    ScheduledChunk c;
    c.id = r.id;
    c.start = r.num_computed;
    c.tokens.assign(r.tokens.begin() + r.num_computed, r.tokens.begin() + r.num_computed + n);
    c.blocks = r.blocks;
    c.sample = r.num_computed + n == static_cast<int64_t>(r.tokens.size());
    out.chunks.push_back(std::move(c));
    out.num_tokens += n;
    budget -= n;
    scheduled.insert(r.id);
  };

  auto continue_running = [&] {
    for (size_t i = 0; i < running_.size() && budget > 0;) {
      const RequestId id = running_[i];
      Request& r = requests_.at(id);
      const int64_t n = scheduled.count(id) ? 0 : chunk_size(r);
      if (n <= 0) {
        ++i;
        continue;
      }
      bool preempted_self = false;
      while (!allocate(r, r.num_computed + n)) {
        // Blocks ran out: the victim is a running request not yet scheduled this step, perhaps this one.
        const RequestId v = victim(scheduled);
        preempt(v);
        out.preempted.push_back(v);
        if (v == id) {
          preempted_self = true;
          break;
        }
      }
      if (preempted_self) continue;  // running_[i] is now the next request
      emit(r, n);
      ++i;
    }
  };
  auto admit_waiting = [&] {
    while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
      Request& r = requests_.at(waiting_.front());
      if (r.blocks.empty()) take_cached_prefix(r);
      const int64_t n = chunk_size(r);
      if (n <= 0 || !allocate(r, r.num_computed + n)) {
        free_blocks(r);  // the prefix it took goes back while it waits
        break;
      }
      waiting_.pop_front();
      r.status = RequestStatus::running;
      running_.push_back(r.id);
      emit(r, n);
    }
  };

  if (config_.policy == SchedulingPolicy::prefill_first) {
    admit_waiting();
    continue_running();
  } else {
    continue_running();
    if (out.preempted.empty()) admit_waiting();  // no admission while requests are being pushed out
  }
  return out;
}

RequestId Scheduler::victim(const std::set<RequestId>& scheduled) const {
  // Among running requests not scheduled this step (the one being scheduled is one of them): the newest, or
  // under the priority policy the lowest priority, newest first.
  std::optional<RequestId> best;
  for (RequestId id : running_) {
    if (scheduled.count(id)) continue;
    const Request& r = requests_.at(id);
    if (!best || config_.policy != SchedulingPolicy::priority) {
      best = id;  // running_ is in admission order: the last one is the newest
      continue;
    }
    const Request& b = requests_.at(*best);
    if (std::tie(r.priority, r.arrival) >= std::tie(b.priority, b.arrival)) best = id;
  }
  return *best;
}

void Scheduler::update(const SchedulerOutput& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    const auto it = requests_.find(c.id);
    if (it == requests_.end()) continue;  // finished or cancelled meanwhile
    Request& r = it->second;
    r.num_computed += static_cast<int64_t>(c.tokens.size());
    key_full_blocks(r);
    if (c.sample) r.tokens.push_back(kPendingToken);
  }
}

void Scheduler::resolve(RequestId id, int64_t position, int64_t token) {
  Request& r = requests_.at(id);
  check(position >= 0 && position < static_cast<int64_t>(r.tokens.size()) &&
            r.tokens[static_cast<size_t>(position)] == kPendingToken,
        "scheduler: request ", id, " has no pending token at position ", position);
  r.tokens[static_cast<size_t>(position)] = token;
  key_full_blocks(r);
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = counters_;
  s.waiting = static_cast<int64_t>(waiting_.size());
  s.running = static_cast<int64_t>(running_.size());
  s.blocks_free = pool_.num_free();
  s.blocks_used = pool_.num_blocks() - s.blocks_free;
  return s;
}

}  // namespace tfm
