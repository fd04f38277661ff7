// Threads for long operations (checkpoints, migrations): each runs one piece
// of work; finished ones are joined as new ones start, the rest by JoinAll.
//
// Thread-safety: Start and JoinAll may be called from any thread; mu_ guards the list.
#ifndef GANDIVA_NODE_MIGRATION_WORKERS_H_
#define GANDIVA_NODE_MIGRATION_WORKERS_H_

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace gandiva::controller {

class Workers {
 public:
  ~Workers() { JoinAll(); }

  void Start(std::function<void()> work) {
    std::list<Worker> finished;
    {
      std::lock_guard lock(mu_);
      for (auto it = workers_.begin(); it != workers_.end();) {
        auto next = std::next(it);
        if (it->done->load()) finished.splice(finished.end(), workers_, it);
        it = next;
      }
      auto done = std::make_shared<std::atomic<bool>>(false);
      workers_.push_back({std::thread([work = std::move(work), done] {
                            work();
                            done->store(true);
                          }),
                          done});
    }
    for (auto& w : finished) w.thread.join();
  }

  void JoinAll() {
    std::list<Worker> all;
    {
      std::lock_guard lock(mu_);
      all.swap(workers_);
    }
    for (auto& w : all) w.thread.join();
  }

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex mu_;
  std::list<Worker> workers_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_WORKERS_H_
