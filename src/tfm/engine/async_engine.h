// An Engine running on a thread of its own, for callers on other threads (the server's): requests are queued
// from any thread and their outputs come back through each request's callback, called on the engine's thread
// (so a callback only hands the output on; it never blocks). The thread steps while requests are unfinished
// and sleeps otherwise. A step that fails (a device error) finishes every unfinished request with the error.
// Callers on other threads wait at most for the step in progress: the thread lets them in before its next step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "tfm/engine/engine.h"

namespace tfm {

class AsyncEngine {
 public:
  using OnOutput = std::function<void(const RequestOutput&)>;

  explicit AsyncEngine(Engine& engine);
  ~AsyncEngine();  // stops the thread; unfinished requests are cancelled
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Checks and queues a request (Engine::add_request's errors are thrown here, on the caller's thread);
  // `on_output` receives each step's output for it, the last one with finished set.
  RequestId submit(const std::vector<int64_t>& prompt, const RequestOptions& options, OnOutput on_output);
  // Cancels a request; its callback is not called again (unless it is running right now, for that step).
  void cancel(RequestId id);
  // Requests queued or running.
  size_t num_unfinished() const;
  EngineStats stats() const;

 private:
  // The lock a caller takes: the loop gives it up for every waiting caller before its next step.
  class CallerLock {
   public:
    explicit CallerLock(const AsyncEngine& engine);
    ~CallerLock();

   private:
    const AsyncEngine& engine_;
    std::unique_lock<std::mutex> lock_;
  };

  void loop();

  Engine& engine_;
  mutable std::mutex mutex_;  // guards engine_ and callbacks_
  // Callers waiting for mutex_. A plain mutex is not fair: the loop, which takes it back right after each
  // step, could keep a caller (a cancel) out until the engine runs dry.
  mutable std::atomic<int> waiting_callers_ = 0;
  mutable std::condition_variable callers_done_;
  std::condition_variable work_;
  std::map<RequestId, OnOutput> callbacks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tfm
