#include "comm/gpu_per_rank.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <utility>

#include <acc/errors.h>

#include "comm/process_group.h"

namespace acc::detail {

std::string ranks_sharing_a_gpu(const std::vector<RankGpu>& gpu_of_rank) {
  // By UUID alone: two containers on one machine have different host names and may share a GPU.
  std::map<std::string, std::vector<int>> ranks_of_gpu;
  for (size_t rank = 0; rank < gpu_of_rank.size(); ++rank) {
    ranks_of_gpu[gpu_of_rank[rank].uuid].push_back(static_cast<int>(rank));
  }
  // In order of each GPU's lowest rank, so that the message reads from rank 0 up.
  std::map<int, std::string> groups;
  for (const auto& [uuid, ranks] : ranks_of_gpu) {
    if (ranks.size() < 2) continue;
    const std::string& host = gpu_of_rank[ranks.front()].host;
    const bool one_host = std::all_of(ranks.begin(), ranks.end(), [&](int r) { return gpu_of_rank[r].host == host; });
    std::ostringstream text;
    text << "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      const RankGpu& gpu = gpu_of_rank[ranks[i]];
      text << (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") << ranks[i] << " (cuda:" << gpu.index
           << (one_host ? "" : " on host '" + gpu.host + "'") << ")";
    }
    text << " share " << uuid << (one_host ? " on host '" + host + "'" : "");
    groups[ranks.front()] = text.str();
  }
  std::string out;
  for (const auto& [first_rank, text] : groups) out += (out.empty() ? "" : "; ") + text;
  return out;
}

namespace {
constexpr char kField = '\t';

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("?");
}

std::string encode(const RankGpu& gpu) {
  return gpu.host + kField + gpu.uuid + kField + std::to_string(gpu.index);
}

RankGpu decode(const std::string& text) {
  const auto first = text.find(kField), second = text.rfind(kField);
  return RankGpu{text.substr(0, first), text.substr(first + 1, second - first - 1),
                 std::stoi(text.substr(second + 1))};
}
}  // namespace

RankGpu this_rank_gpu() {
  const int index = c10::impl::getDeviceGuardImpl(c10::kCUDA)->getDevice().index();
  return RankGpu{host_name(), gpu_uuid(index), index};
}

void check_one_gpu_per_rank(ProcessGroup& group, const RankGpu& mine) {
  std::vector<RankGpu> gpus;
  for (const auto& text : group.all_gather_strings(encode(mine), "comparing the ranks' GPUs")) {
    gpus.push_back(decode(text));
  }
  const std::string shared = ranks_sharing_a_gpu(gpus);
  if (shared.empty()) return;
  // Rank 0 serves the store and takes it down when it throws: it first waits (briefly) until every
  // rank has read every GPU, so that all of them raise this error rather than a lost connection.
  const std::string read_key = "acc/gpus_compared/";
  group.store().set(read_key + std::to_string(group.rank()), std::vector<uint8_t>{1});
  if (group.rank() == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < group.size(); ++r) keys.push_back(read_key + std::to_string(r));
    try {
      group.store().wait(keys, std::chrono::seconds(10));
    } catch (const std::exception&) {
      // A rank that has not read by now has failed otherwise; this rank's error stands.
    }
  }
  throw DistributedError(
      "acc: NCCL needs a GPU of its own for each rank, and " + shared +
      ". Start at most as many processes on a machine as it has GPUs (acc-launch --num_processes), "
      "give each rank a GPU of its own (CUDA_VISIBLE_DEVICES), or let ranks share GPUs through "
      "Gloo with AcceleratorOptions().backend(\"gloo\") (slower: CUDA tensors travel through host "
      "memory)");
}

}  // namespace acc::detail
