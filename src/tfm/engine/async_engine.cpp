#include "tfm/engine/async_engine.h"

#include <utility>
#include <vector>

namespace tfm {

AsyncEngine::CallerLock::CallerLock(const AsyncEngine& engine) : engine_(engine) {
  ++engine_.waiting_callers_;
  lock_ = std::unique_lock(engine_.mutex_);
  --engine_.waiting_callers_;
}

AsyncEngine::CallerLock::~CallerLock() {
  lock_.unlock();
  engine_.callers_done_.notify_all();
}

AsyncEngine::AsyncEngine(Engine& engine) : engine_(engine), thread_([this] { loop(); }) {}

AsyncEngine::~AsyncEngine() {
  {
    CallerLock lock(*this);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
  for (const auto& [id, callback] : callbacks_) engine_.cancel(id);
}

RequestId AsyncEngine::submit(const std::vector<int64_t>& prompt, const RequestOptions& options, OnOutput on_output) {
  RequestId id;
  {
    CallerLock lock(*this);
    id = engine_.add_request(prompt, options);
    callbacks_.emplace(id, std::move(on_output));
  }
  work_.notify_all();
  return id;
}

void AsyncEngine::cancel(RequestId id) {
  CallerLock lock(*this);
  if (callbacks_.erase(id)) engine_.cancel(id);
}

size_t AsyncEngine::num_unfinished() const {
  CallerLock lock(*this);
  return callbacks_.size();
}

EngineStats AsyncEngine::stats() const {
  CallerLock lock(*this);
  return engine_.stats();
}

void AsyncEngine::loop() {
  while (true) {
    std::unique_lock lock(mutex_);
    work_.wait(lock, [&] { return stopping_ || engine_.has_unfinished(); });
    callers_done_.wait(lock, [&] { return waiting_callers_ == 0; });
    if (stopping_) return;
    if (!engine_.has_unfinished()) continue;  // a caller cancelled the last request
    std::vector<std::pair<OnOutput, RequestOutput>> deliveries;
    try {
      for (RequestOutput& out : engine_.step()) {
        const auto it = callbacks_.find(out.id);
        if (it == callbacks_.end()) continue;
        deliveries.emplace_back(it->second, std::move(out));
        if (deliveries.back().second.finished) callbacks_.erase(it);
      }
    } catch (const std::exception& e) {
      // The step's plan is lost with it: every unfinished request ends with the error, its blocks freed.
      for (auto& [id, callback] : callbacks_) {
        engine_.cancel(id);
        RequestOutput failed;
        failed.id = id;
        failed.finished = true;
        failed.error = e.what();
        deliveries.emplace_back(std::move(callback), std::move(failed));
      }
      callbacks_.clear();
    }
    lock.unlock();
    for (auto& [callback, out] : deliveries) callback(out);
  }
}

}  // namespace tfm
