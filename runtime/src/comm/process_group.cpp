#include "comm/process_group.h"

#include <acc_common/blame_words.h>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <acc/errors.h>

#include <acc_common/network_route.h>

#include <algorithm>
#include <functional>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "comm/deadline_store.h"
#include "comm/gpu_per_rank.h"
#include "comm/rank_positions.h"
#include "comm/rendezvous.h"
#include "comm/ring_collectives.h"

namespace acc::detail {

namespace blame_words = acc::common::blame_words;

std::string error_text(const std::exception& error) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

std::string seconds_text(Milliseconds timeout) {
  auto ms = timeout.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

namespace {

// How long a failure report waits for the store to answer one call: a store that answers at all
// does so within milliseconds.
Milliseconds answer_budget(Milliseconds timeout) {
  return std::clamp(timeout / 20, Milliseconds(250), Milliseconds(5000));
}

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// The first line a job that spans machines prints on each machine: which network its ranks use.
GlooDevice choose_gloo_device(const LaunchInfo& launch) {
  const auto network = common::choose_gloo_network(launch.master_addr, variable("GLOO_SOCKET_IFNAME"),
                                                   variable("NCCL_SOCKET_IFNAME"));
  if (launch.local_world_size < launch.world_size && launch.local_rank == 0) {
    std::cerr << "acc: ranks of this machine reach the others over " << network.description
              << " (export GLOO_SOCKET_IFNAME to choose another interface)\n";
  }
  return {network.interface, network.address, network.description};
}

}  // namespace

ProcessGroup::ProcessGroup(const LaunchInfo& launch, CudaCollectives cuda,
                           std::optional<Milliseconds> timeout)
    : rank_(launch.rank),
      size_(launch.world_size),
      cuda_(cuda),
      gloo_timeout_(timeout.value_or(kDefaultGlooTimeout)),
      nccl_timeout_(timeout.value_or(kDefaultNcclTimeout)),
      gloo_device_(choose_gloo_device(launch)) {
  const Milliseconds timeout_of_join = cuda_ == CudaCollectives::kNccl ? nccl_timeout_ : gloo_timeout_;
  JoinedStore joined = rendezvous(launch, timeout_of_join);
  store_access_ = std::move(joined.access);
  store_ = std::move(joined.store);  // every call on it answers within the deadline (deadline_store.h)
  if (cuda_ == CudaCollectives::kNccl) check_one_gpu_per_rank(*this, this_rank_gpu());  // subgroups inherit it
  create_backends();
}

ProcessGroup::ProcessGroup(const ProcessGroup& parent, int rank, int size,
                           c10::intrusive_ptr<c10d::Store> store)
    : rank_(rank),
      size_(size),
      cuda_(parent.cuda_),
      gloo_timeout_(parent.gloo_timeout_),
      nccl_timeout_(parent.nccl_timeout_),
      stall_report_interval_(parent.stall_report_interval_),
      gloo_device_(parent.gloo_device_),
      store_access_(parent.store_access_),
      store_(std::move(store)) {
  create_backends();
}

void ProcessGroup::create_backends() {
  try {
    gloo_ = make_gloo_backend(c10::make_intrusive<c10d::PrefixStore>("acc/gloo", store_), rank_,
                              size_, gloo_timeout_, gloo_device_);
    if (cuda_ == CudaCollectives::kNccl) {
      nccl_ = make_nccl_backend(c10::make_intrusive<c10d::PrefixStore>("acc/nccl", store_), rank_,
                                size_, nccl_timeout_);
    }
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    fail("creating the process group", gloo_timeout_, error_text(e));
  }
}

std::unique_ptr<ProcessGroup> ProcessGroup::subgroup(const std::vector<int>& ranks,
                                                     const std::string& name) {
  auto self = std::find(ranks.begin(), ranks.end(), rank_);
  if (self == ranks.end()) {
    throw Error("acc: internal: rank " + std::to_string(rank_) + " is not in subgroup " + name);
  }
  // Its own key space: the subgroup's backends and string exchanges never meet the parent's.
  auto store = c10::make_intrusive<c10d::PrefixStore>("acc/sub/" + name, store_);
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(
      *this, static_cast<int>(self - ranks.begin()), static_cast<int>(ranks.size()), store));
}

ProcessGroup::~ProcessGroup() = default;

c10d::Backend& ProcessGroup::backend_for(const at::Tensor& like) {
  if (!like.is_cuda()) return *gloo_;
  switch (cuda_) {
    case CudaCollectives::kNccl:
      return *nccl_;
    case CudaCollectives::kGloo:
      return *gloo_;
    case CudaCollectives::kNone:
      break;
  }
  throw DistributedError(
      "acc: a CUDA tensor reached a collective, but this process group was created for CPU "
      "(cpu=true or no GPU); keep tensors on accelerator.device()");
}

Milliseconds ProcessGroup::timeout_for(const at::Tensor& like) const {
  return like.is_cuda() && cuda_ == CudaCollectives::kNccl ? nccl_timeout_ : gloo_timeout_;
}

void ProcessGroup::fail(const std::string& what, Milliseconds timeout,
                        const std::string& cause) const {
  throw DistributedError("acc: " + what + std::string(blame_words::kFailedOn) + std::to_string(rank_) + " of " +
                         std::to_string(size_) + " (timeout " + seconds_text(timeout) + "): " + cause +
                         ". Check the other ranks' output. The deadline is "
                         "AcceleratorOptions().timeout(...).");
}

std::string ProcessGroup::absent_peers(const std::string& where, Milliseconds timeout, std::string& cause) const {
  // Every rank whose collective fails posts where it failed and gives its peers a moment to do the
  // same (their deadlines expire within moments of each other); a peer that never posts did not take
  // part: it is stuck outside the collective, or has exited. One that failed or waits elsewhere
  // called another collective.
  const Milliseconds grace = std::clamp(timeout / 10, Milliseconds(1000), Milliseconds(5000));
  const RankPosition mine{position(), RankState::kFailed, where};
  std::vector<std::optional<RankPosition>> positions;
  // A store that does not answer at once will not answer: its rank is stopped or cut off. Asking
  // it with the whole deadline would double the time until the job hears of it.
  const StoreDeadlineGuard answer_soon(answer_budget(timeout));
  try {
    post_position(*store_, rank_, mine);
    const auto give_up = std::chrono::steady_clock::now() + grace;
    for (;;) {
      positions = read_positions(*store_, size_);
      bool all_failed = true;
      for (int r = 0; r < size_; ++r)
        all_failed = all_failed && (r == rank_ || (positions[r] && positions[r]->state == RankState::kFailed));
      if (all_failed || std::chrono::steady_clock::now() >= give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // Rank 0 serves the store: once it returns, its program usually ends and the store with it. It
    // waits (within the same grace) until every peer has read the positions too.
    store_->set("acc/positions_read/" + std::to_string(rank_), std::vector<uint8_t>{1});
    if (rank_ == 0) {
      // Only peers that reported a failure read the positions; a stopped one never will.
      auto all_read = [&] {
        for (int r = 1; r < size_; ++r)
          if (positions[r] && positions[r]->state == RankState::kFailed &&
              !store_->check({"acc/positions_read/" + std::to_string(r)}))
            return false;
        return true;
      };
      while (!all_read() && std::chrono::steady_clock::now() < give_up + grace) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        positions = read_positions(*store_, size_);  // a peer may fail after this rank's grace
      }
    }
  } catch (const StoreNotAnswering&) {
    return rank_ == 0 ? "" : "; rank 0" + std::string(blame_words::kStoreSilent) +
                                 " either: it is stopped (SIGSTOP, a debugger) or its machine is unreachable";
  } catch (const std::exception&) {
    return rank_ == 0 ? "" : "; rank 0" + std::string(blame_words::kStoreSilent) + " either" +
                                 std::string(blame_words::kStoreExited);
  }
  bool all_with_me = true;
  for (int r = 0; r < size_; ++r)
    all_with_me = all_with_me && (r == rank_ || (positions[r] && positions[r]->collective == mine.collective &&
                                                 positions[r]->what == mine.what));
  if (all_with_me) return "";
  // The backend's own error about ranks in different collectives (Gloo's EnforceNotMet on a size it
  // did not expect, a timeout) says nothing the user can act on; where each rank is does.
  if (calls_differ(positions, rank_, mine)) cause = "the ranks are not in the same collective";
  return "; this rank was in " + describe_position(mine) + ": " + describe_peers(positions, rank_, mine);
}

// Gloo, acc's rings and the store block this thread until the exchange completes; waiting in slices
// costs nothing (a condition variable, a socket poll) and lets the rank say where it waits. NCCL's
// works are left alone: a timed-out NCCL wait aborts the communicator, and NCCL's own watchdog reports
// stalls.
Milliseconds ProcessGroup::wait_and_report_stall(const std::function<bool(Milliseconds)>& wait_for,
                                                 const std::string& what, Milliseconds timeout,
                                                 bool& posted) const {
  posted = false;
  constexpr Milliseconds kPostAfter{1000};
  if (stall_report_interval_.count() <= 0 || timeout <= kPostAfter) return timeout;
  const auto start = std::chrono::steady_clock::now();
  auto waited = [&] {
    return std::chrono::duration_cast<Milliseconds>(std::chrono::steady_clock::now() - start);
  };
  if (wait_for(kPostAfter)) return Milliseconds(1);
  const RankPosition mine{position(), RankState::kWaiting, what};
  try {
    // Rank 0 may be the one that does not come: the store it serves is asked within the time left.
    const StoreDeadlineGuard within(timeout - waited());
    post_position(*store_, rank_, mine);
  } catch (const std::exception&) {
    return std::max(timeout - waited(), Milliseconds(1));  // the collective's own failure will say why
  }
  posted = true;
  if (stall_report_interval_ >= timeout) return timeout - waited();
  if (wait_for(stall_report_interval_ - waited())) return Milliseconds(1);
  std::string peers;
  try {
    const StoreDeadlineGuard within(std::min(answer_budget(timeout), std::max(timeout - waited(), Milliseconds(1))));
    peers = describe_peers(read_positions(*store_, size_), rank_, mine);
  } catch (const StoreNotAnswering&) {
    peers = "rank 0" + std::string(blame_words::kStoreSilent) +
            ": it is stopped (SIGSTOP, a debugger) or its machine is unreachable";
  } catch (const std::exception& e) {
    peers = "the job's store does not answer (" + error_text(e) + "): rank 0 has exited";
  }
  std::cerr << "acc: rank " << rank_ << " has waited " << seconds_text(waited() / 1000 * 1000) << " in "
            << describe_position(mine) << ": " << (peers.empty() ? "every rank is in it" : peers)
            << ". It waits on until the timeout (" << seconds_text(timeout)
            << "); AcceleratorOptions().stall_report_interval(...) sets when this is said\n";
  return std::max(timeout - waited(), Milliseconds(1));
}

void ProcessGroup::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what,
                        Milliseconds timeout, const std::string& operand) const {
  const std::string where = operand.empty() ? what : what + " of " + operand;
  std::string cause;
  try {
    bool posted = false;
    // True once the work is complete, with or without an error (the last wait reports it).
    auto wait_for = [&work](Milliseconds slice) {
      try {
        work->wait(std::max(slice, Milliseconds(1)));  // 0 would mean "no timeout" to c10d
        return true;
      } catch (const std::exception&) {
        return work->isCompleted();
      }
    };
    const Milliseconds left =
        cuda_ == CudaCollectives::kNccl ? timeout : wait_and_report_stall(wait_for, where, timeout, posted);
    if (work->wait(left)) {
      if (posted) post_position(*store_, rank_, {position(), RankState::kDone, where});
      return;
    }
    cause = "the operation did not complete";
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    cause = error_text(e);
  }
  const std::string peers = absent_peers(where, timeout, cause);
  fail(what, timeout, cause + peers);
}

namespace {
// "float[2, 3]": what a rank's position says of the tensor it exchanges.
std::string operand_text(const at::Tensor& tensor) {
  std::string text = std::string(c10::toString(tensor.scalar_type())) + "[";
  for (int64_t d = 0; d < tensor.dim(); ++d) text += (d ? ", " : "") + std::to_string(tensor.size(d));
  return text + "]";
}
}  // namespace

void ProcessGroup::all_reduce_(at::Tensor& tensor, c10d::ReduceOp op, const std::string& what) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  options.timeout = timeout_for(tensor);
  wait(launched(backend_for(tensor).allreduce(tensors, options)), what, options.timeout, operand_text(tensor));
}

void ProcessGroup::broadcast_(at::Tensor& tensor, int root, const std::string& what) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.timeout = timeout_for(tensor);
  wait(launched(backend_for(tensor).broadcast(tensors, options)), what, options.timeout, operand_text(tensor));
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor& tensor, const std::string& what) {
  auto input = tensor.contiguous();
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < size_; ++r) outputs[0].push_back(at::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  c10d::AllgatherOptions options;
  options.timeout = timeout_for(tensor);
  wait(launched(backend_for(tensor).allgather(outputs, inputs, options)), what, options.timeout, operand_text(input));
  return outputs[0];
}

RingCollectives& ProcessGroup::ring() {
  if (!ring_) ring_ = std::make_unique<RingCollectives>(*gloo_, rank_, size_, gloo_timeout_);
  return *ring_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::reduce_scatter_flat(const at::Tensor& output,
                                                                  const at::Tensor& input) {
  if (input.is_cuda()) {
    c10d::ReduceScatterOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    options.timeout = timeout_for(input);
    auto out = output;
    auto in = input;
    return launched(backend_for(input)._reduce_scatter_base(out, in, options));
  }
  return launched(ring().reduce_scatter(output, input));
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::all_gather_flat(const at::Tensor& flat) {
  if (flat.is_cuda()) {
    c10d::AllgatherOptions options;
    options.timeout = timeout_for(flat);
    auto out = flat;
    // A copy of this rank's chunk as the input: NCCL documents the in-place case, but it has not
    // run on a GPU here.
    const int64_t chunk = flat.numel() / size_;
    auto in = flat.narrow(0, rank_ * chunk, chunk).clone();
    return launched(backend_for(flat)._allgather_base(out, in, options));
  }
  return launched(ring().all_gather(flat));
}

void ProcessGroup::barrier(const std::string& what) {
  c10d::BarrierOptions options;
  options.timeout = gloo_timeout_;
  wait(launched(gloo_->barrier(options)), what, gloo_timeout_);
}

std::vector<std::string> ProcessGroup::all_gather_strings(const std::string& value,
                                                          const std::string& what) {
  // Each call uses fresh keys; the round number advances identically on every rank.
  const std::string prefix = "acc/strings/" + std::to_string(store_round_++) + "/";
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(prefix + std::to_string(r));
  std::vector<std::string> result;
  bool timed_out = false;
  try {
    store_->set(keys[static_cast<size_t>(rank_)], std::vector<uint8_t>(value.begin(), value.end()));
    // True once every value is there. Polled with check(), not wait(timeout): c10d prints two
    // warning lines for every wait that times out. The poll starts fast (metadata exchanges are
    // usually complete within a millisecond) and backs off to 20 ms.
    auto wait_for = [&](Milliseconds slice) {
      const auto until = std::chrono::steady_clock::now() + slice;
      auto pause = std::chrono::microseconds(50);
      while (!store_->check(keys)) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(pause);
        pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
      }
      return true;
    };
    bool posted = false;
    const Milliseconds left = wait_and_report_stall(wait_for, what, gloo_timeout_, posted);
    if (!wait_for(left)) {
      timed_out = true;
      throw DistributedError("the exchange did not complete");
    }
    if (posted) post_position(*store_, rank_, {position(), RankState::kDone, what});
    for (const auto& key : keys) {
      auto bytes = store_->get(key);
      result.emplace_back(bytes.begin(), bytes.end());
    }
  } catch (const std::exception& e) {
    std::string cause = error_text(e);
    const std::string peers = timed_out ? absent_peers(what, gloo_timeout_, cause) : "";
    fail(what, gloo_timeout_, cause + peers);
  }
  return result;
}

}  // namespace acc::detail
