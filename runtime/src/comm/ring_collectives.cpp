#include "comm/ring_collectives.h"

#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace acc::detail {

class RingCollectives::Job : public c10d::Work {
 public:
  explicit Job(std::function<void()> body) : body_(std::move(body)) {}

  void run() {
    try {
      body_();
      finish();
    } catch (...) {
      finish(std::current_exception());
    }
    body_ = nullptr;  // drops the tensors it holds
  }
  void fail(std::exception_ptr error) {
    finish(std::move(error));
    body_ = nullptr;
  }

 private:
  std::function<void()> body_;
};

RingCollectives::RingCollectives(c10d::Backend& backend, int rank, int size,
                                 std::chrono::milliseconds timeout)
    : backend_(backend), rank_(rank), size_(size), timeout_(timeout), thread_([this] { serve(); }) {}

RingCollectives::~RingCollectives() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& work : in_flight_) work->abort();
  }
  wake_.notify_all();
  thread_.join();
}

namespace {
void check_flat(const at::Tensor& tensor, int64_t numel, const char* what) {
  TORCH_CHECK(tensor.dim() == 1 && tensor.is_contiguous() && tensor.is_cpu() && tensor.numel() == numel,
              "acc: internal: ring ", what, " must be a contiguous 1-D CPU tensor of ", numel,
              " elements, got ", tensor.sizes(), " on ", tensor.device());
}
}  // namespace

c10::intrusive_ptr<c10d::Work> RingCollectives::reduce_scatter(at::Tensor output, at::Tensor input) {
  check_flat(output, output.numel(), "reduce-scatter output");
  check_flat(input, output.numel() * size_, "reduce-scatter input");
  return launch([this, output = std::move(output), input = std::move(input)]() mutable {
    if (size_ == 1) {
      output.copy_(input);
      return;
    }
    if (output.numel() == 0) return;  // chunk() would give fewer than size() chunks
    auto chunks = input.chunk(size_);
    auto incoming = scratch(output.numel(), output.options());
    // Step s passes on the partial sum of chunk rank-s-1 and adds the previous rank's partial
    // sum of chunk rank-s-2 to its own; after size-1 steps chunk `rank` has every rank's part.
    for (int s = 0; s < size_ - 1; ++s) {
      const int sent = (rank_ - s - 1 + 2 * size_) % size_;
      const int received = (rank_ - s - 2 + 2 * size_) % size_;
      exchange(chunks[sent], incoming);
      if (s == size_ - 2) {
        at::add_out(output, chunks[received], incoming);
      } else {
        chunks[received].add_(incoming);
      }
    }
  });
}

c10::intrusive_ptr<c10d::Work> RingCollectives::all_gather(at::Tensor flat) {
  check_flat(flat, flat.numel(), "all-gather buffer");
  TORCH_CHECK(flat.numel() % size_ == 0, "acc: internal: ring all-gather of ", flat.numel(),
              " elements over ", size_, " ranks");
  return launch([this, flat = std::move(flat)] {
    if (flat.numel() == 0) return;
    auto chunks = flat.chunk(size_);
    // Step s passes on chunk rank-s (its own first, then the one just received).
    for (int s = 0; s < size_ - 1; ++s) {
      exchange(chunks[(rank_ - s + size_) % size_], chunks[(rank_ - s - 1 + size_) % size_]);
    }
  });
}

c10::intrusive_ptr<c10d::Work> RingCollectives::launch(std::function<void()> body) {
  auto job = c10::make_intrusive<Job>(std::move(body));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job);
  }
  wake_.notify_one();
  return job;
}

void RingCollectives::serve() {
  c10::NoGradGuard no_grad;
  for (;;) {
    c10::intrusive_ptr<Job> job;
    std::exception_ptr broken;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      job = std::move(queue_.front());
      queue_.pop_front();
      if (stopping_ && !broken_) {
        broken_ = std::make_exception_ptr(std::runtime_error("the process group was shut down"));
      }
      broken = broken_;
    }
    if (broken) {
      job->fail(broken);
      continue;
    }
    job->run();
    if (auto error = job->exception()) {
      std::lock_guard<std::mutex> lock(mutex_);
      broken_ = error;
    }
  }
}

void RingCollectives::exchange(const at::Tensor& outgoing, const at::Tensor& incoming) {
  // Both ends count exchanges alike, so the tag pairs each send with its receive; Gloo's own
  // collectives use tags with a prefix in the high bits, which these never reach.
  const int tag = next_tag_;
  next_tag_ = (next_tag_ + 1) % (1 << 30);
  std::vector<at::Tensor> receive{incoming};
  std::vector<at::Tensor> send{outgoing};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw std::runtime_error("the process group was shut down");
    in_flight_ = {backend_.recv(receive, (rank_ - 1 + size_) % size_, tag),
                  backend_.send(send, (rank_ + 1) % size_, tag)};
  }
  struct Clear {
    RingCollectives& ring;
    ~Clear() {
      std::lock_guard<std::mutex> lock(ring.mutex_);
      ring.in_flight_.clear();
    }
  } clear{*this};
  const auto works = in_flight_;  // only this thread assigns it
  for (const auto& work : works) {
    if (!work->wait(timeout_)) throw std::runtime_error("aborted: the process group was shut down");
  }
}

at::Tensor RingCollectives::scratch(int64_t numel, const at::TensorOptions& options) {
  if (!scratch_.defined() || scratch_.numel() < numel || scratch_.dtype() != options.dtype()) {
    scratch_ = at::empty({numel}, options);
  }
  return scratch_.narrow(0, 0, numel);
}

}  // namespace acc::detail
