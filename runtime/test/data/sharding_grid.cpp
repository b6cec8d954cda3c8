// Prints acc's per-rank batches for the parity grid (test/parity/sharding_parity.py runs
// Accelerate on the same grid and compares line by line). One line per case and rank:
//   P n bs split even drop rank: len=L [i,j,...] [..]      or      ...: error
#include <torch/data/samplers/sequential.h>

#include <iostream>
#include <sstream>

#include <acc/data_sharding.h>

int main() {
  for (int processes : {1, 2, 3, 4}) {
    for (size_t n : {0, 1, 3, 10, 17, 64, 100}) {
      for (size_t batch_size : {1, 3, 4, 8}) {
        for (bool split : {false, true}) {
          for (bool even : {false, true}) {
            for (bool drop_last : {false, true}) {
              for (int rank = 0; rank < processes; ++rank) {
                std::cout << processes << ' ' << n << ' ' << batch_size << ' ' << split << ' '
                          << even << ' ' << drop_last << ' ' << rank << ':';
                acc::ShardOptions shard{processes, rank, split, even};
                try {
                  acc::BatchSamplerShard<torch::data::samplers::SequentialSampler> sampler(
                      torch::data::samplers::SequentialSampler(n), batch_size, drop_last, shard);
                  sampler.reset();
                  std::cout << " len=" << acc::sharded_length(n, batch_size, drop_last, shard);
                  while (auto batch = sampler.next(batch_size)) {
                    std::cout << " [";
                    for (size_t i = 0; i < batch->size(); ++i) {
                      std::cout << (i ? "," : "") << (*batch)[i];
                    }
                    std::cout << ']';
                  }
                } catch (const acc::ConfigError&) {
                  std::cout << " error";
                }
                std::cout << '\n';
              }
            }
          }
        }
      }
    }
  }
  return 0;
}
