#pragma once
// Reduce-scatter and all-gather of flat CPU buffers as rings of send/recv over Gloo.
//
// Why not Gloo's own: ProcessGroupGloo::_reduce_scatter_base clones the input, all-reduces all of
// it and copies one chunk out; _allgather_base gathers into a temporary and copies every chunk
// back. On 2 ranks over loopback, for 50M floats: all-reduce 158 ms, Gloo's reduce-scatter 399 ms
// and all-gather 284 ms, these rings 139 ms and 86 ms (docs/fsdp.md). A ring moves (N-1)/N of the
// buffer per rank, in place: the reduce-scatter needs one chunk of scratch, the all-gather none.
//
// The rings run one at a time, in the order launched, on a thread of their own, so a launch
// returns at once (FSDP overlaps them with backward). Every rank must launch the same sequence,
// as for any collective.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace acc::detail {

class RingCollectives {
 public:
  /// `backend` (Gloo) must outlive this object; `timeout` bounds each send and receive.
  RingCollectives(c10d::Backend& backend, int rank, int size, std::chrono::milliseconds timeout);
  /// Aborts a ring in progress and fails those not started.
  ~RingCollectives();
  RingCollectives(const RingCollectives&) = delete;
  RingCollectives& operator=(const RingCollectives&) = delete;

  /// `output` = this rank's chunk of the SUM of every rank's `input` (size() equal chunks, 1-D,
  /// contiguous). `input` is overwritten with partial sums.
  c10::intrusive_ptr<c10d::Work> reduce_scatter(at::Tensor output, at::Tensor input);
  /// Fills every chunk of `flat` (1-D, contiguous, size() equal chunks) with its owner's; chunk
  /// rank() must already hold this rank's.
  c10::intrusive_ptr<c10d::Work> all_gather(at::Tensor flat);

 private:
  class Job;
  c10::intrusive_ptr<c10d::Work> launch(std::function<void()> body);
  void serve();
  /// Sends `outgoing` to the next rank and receives `incoming` from the previous one, in segments
  /// all posted at once; `arrived(offset, length)` runs as each segment of `incoming` lands, so that
  /// reducing one segment overlaps the transfer of the next.
  void exchange(const at::Tensor& outgoing, const at::Tensor& incoming,
                const std::function<void(int64_t, int64_t)>& arrived = nullptr);
  at::Tensor scratch(int64_t numel, const at::TensorOptions& options);

  c10d::Backend& backend_;
  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  int next_tag_ = 0;          // the same sequence on every rank: one tag per segment
  at::Tensor scratch_;        // the reduce-scatter's receive buffer, reused
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<c10::intrusive_ptr<Job>> queue_;
  std::vector<c10::intrusive_ptr<c10d::Work>> in_flight_;  // the exchange's sends and receives
  std::exception_ptr broken_;  // a failed ring leaves the others unmatched: later ones fail at once
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace acc::detail
