// Checkpoint throughput, with baselines measured in the same run on the same directory:
//  - save_state of a model (default 1 GB of fp32 weights) plus its Adam state, against writing
//    the same number of bytes sequentially with write() + fsync;
//  - load_state of that checkpoint, against reading the same number of bytes with read(), into the
//    running optimizer and into a fresh one (as a resumed process has), and against itself without
//    checksum verification (ProjectConfiguration::verify_checksums(false));
//  - a safetensors file read by memory map (acc::safetensors::MappedFile, then one pass over the
//    values) against read() into freshly allocated tensors and the same pass;
//  - the optimizer's part of load_state against loading the same optimizer from libtorch's
//    archive (how checkpoints stored it before optimizer.safetensors).
// Usage: acc_bench_checkpoint [--gib 1.0] [--dir DIR] [--repeat 3]. Prints ratios (>= 0.7 is the
// target for save and load: the checkpoint code adds at most 30% over raw I/O).
#include <torch/torch.h>

#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <acc/acc.h>

namespace fs = std::filesystem;

namespace {

// Not std::filesystem::remove_all: libtorch.so exports a copy of it that crashes.
void remove_tree(const std::string& path) {
  ::nftw(path.c_str(), [](const char* entry, const struct stat*, int, struct FTW*) { return ::remove(entry); },
         16, FTW_DEPTH | FTW_PHYS);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

uint64_t directory_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) total += entry.file_size();
  }
  return total;
}

double raw_write(const std::string& path, const std::vector<char>& block, uint64_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (uint64_t done = 0; done < bytes;) {
    const size_t n = std::min<uint64_t>(block.size(), bytes - done);
    if (::write(fd, block.data(), n) != static_cast<ssize_t>(n)) std::abort();
    done += n;
  }
  ::fsync(fd);
  ::close(fd);
  return seconds_since(start);
}

double raw_read(const std::string& path, std::vector<char>& block) {
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  while (::read(fd, block.data(), block.size()) > 0) {
  }
  ::close(fd);
  return seconds_since(start);
}

// read() into memory allocated for it (what a resumed process must do: its page faults count).
double raw_read_fresh(const std::string& path, uint64_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  char* memory = static_cast<char*>(std::malloc(bytes));
  const int fd = ::open(path.c_str(), O_RDONLY);
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::read(fd, memory + done, std::min<uint64_t>(bytes - done, 1u << 30));
    if (n <= 0) break;
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  std::free(memory);
  return seconds_since(start);
}

// Reads a safetensors file with read() into new tensors (what a loader without mmap does).
double copy_read_and_sum(const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  acc::safetensors::MappedFile header_only(path);  // only for the offsets
  const int fd = ::open(path.c_str(), O_RDONLY);
  double sum = 0;
  for (const auto& info : header_only.header().tensors) {
    auto tensor = torch::empty(info.shape, torch::kFloat);
    ::pread(fd, tensor.data_ptr(), info.end - info.begin, header_only.header().data_start + info.begin);
    sum += tensor.sum().item<double>();
  }
  ::close(fd);
  if (sum == 1234.5) std::cout << "";
  return seconds_since(start);
}

double mapped_read_and_sum(const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  double sum = 0;
  for (const auto& [name, tensor] : acc::safetensors::load_file(path)) sum += tensor.sum().item<double>();
  if (sum == 1234.5) std::cout << "";
  return seconds_since(start);
}

template <typename F>
double best_of(int repeat, F&& f) {
  double best = 1e30;
  for (int i = 0; i < repeat; ++i) best = std::min(best, f());
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 1.0;
  int repeat = 3;
  std::string dir = (fs::temp_directory_path() / "acc_bench_checkpoint").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--gib") gib = std::stod(argv[i + 1]);
    else if (flag == "--dir") dir = argv[i + 1];
    else if (flag == "--repeat") repeat = std::stoi(argv[i + 1]);
  }
  remove_tree(dir);
  fs::create_directories(dir);

  acc::Accelerator accelerator(acc::AcceleratorOptions().cpu(true));
  const int64_t width = 4096;
  const int64_t layers = std::max<int64_t>(1, static_cast<int64_t>(gib * (1 << 30) / (width * width * 4)));
  torch::nn::Sequential model;
  for (int64_t i = 0; i < layers; ++i) model->push_back(torch::nn::Linear(width, width));
  torch::optim::Adam optimizer(model->parameters(), 1e-3);
  for (auto& p : model->parameters()) p.mutable_grad() = torch::full_like(p, 1e-3);
  optimizer.step();  // materialises Adam's exp_avg and exp_avg_sq
  accelerator.prepare(model, optimizer);

  const std::string checkpoint = dir + "/state";
  const double save = best_of(repeat, [&] {
    const auto start = std::chrono::steady_clock::now();
    accelerator.save_state(checkpoint);
    return seconds_since(start);
  });
  const uint64_t bytes = directory_bytes(checkpoint);
  const double load = best_of(repeat, [&] {
    const auto start = std::chrono::steady_clock::now();
    accelerator.load_state(checkpoint);
    return seconds_since(start);
  });
  // The same load without checking the checksums save_state recorded: the verification's cost.
  acc::Accelerator unverified(
      acc::AcceleratorOptions().cpu(true).project_config(acc::ProjectConfiguration().verify_checksums(false)));
  unverified.prepare(model, optimizer);
  const double load_unverified = best_of(repeat, [&] {
    const auto start = std::chrono::steady_clock::now();
    unverified.load_state(checkpoint);
    return seconds_since(start);
  });
  // A resumed process has no optimizer state yet: its load allocates (page faults) instead of
  // copying into the state already there. One load each, so nothing is reused.
  const double fresh_load = best_of(repeat, [&] {
    torch::optim::Adam fresh(model->parameters(), 1e-3);
    acc::Accelerator resumed(acc::AcceleratorOptions().cpu(true));
    resumed.prepare(model, fresh);
    const auto start = std::chrono::steady_clock::now();
    resumed.load_state(checkpoint);
    return seconds_since(start);
  });
  std::vector<char> block(8 << 20, 1);
  const double write = best_of(repeat, [&] { return raw_write(dir + "/raw.bin", block, bytes); });
  const double read = best_of(repeat, [&] { return raw_read(dir + "/raw.bin", block); });
  const double read_fresh = best_of(repeat, [&] { return raw_read_fresh(dir + "/raw.bin", bytes); });
  const std::string weights = checkpoint + "/model.safetensors";
  const double mapped = best_of(repeat, [&] { return mapped_read_and_sum(weights); });
  const double copied = best_of(repeat, [&] { return copy_read_and_sum(weights); });
  // The model's part of load_state alone (the rest is libtorch's optimizer archive).
  const double weights_load = best_of(repeat, [&] {
    const auto start = std::chrono::steady_clock::now();
    acc::load_checkpoint_in_model(model, weights);
    return seconds_since(start);
  });
  const double weights_gb = fs::file_size(weights) / 1e9;
  // The optimizer through libtorch's archive alone, as load_state stored it before the state
  // tensors moved to optimizer.safetensors: the baseline for that change, in the same run.
  const std::string archive_path = dir + "/optimizer_archive.bin";
  {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to(archive_path);
  }
  const double archive_gb = fs::file_size(archive_path) / 1e9;
  const double archive_load = best_of(repeat, [&] {
    const auto start = std::chrono::steady_clock::now();
    torch::serialize::InputArchive archive;
    archive.load_from(archive_path);
    optimizer.load(archive);
    return seconds_since(start);
  });

  const double gb = bytes / 1e9;
  std::cout << "checkpoint: " << gb << " GB (" << layers << " x Linear(" << width << ", " << width
            << ") + Adam state), best of " << repeat << "\n"
            << "save_state  " << gb / save << " GB/s   raw write+fsync " << gb / write
            << " GB/s   ratio " << write / save << "\n"
            << "load_state  " << gb / load << " GB/s   raw read        " << gb / read
            << " GB/s   ratio " << read / load << "\n"
            << "load_state without checksum verification " << gb / load_unverified
            << " GB/s   verification adds " << 100.0 * (load - load_unverified) / load_unverified << "% to the load\n"
            << "load_state into a fresh optimizer " << gb / fresh_load << " GB/s   raw read into new memory "
            << gb / read_fresh << " GB/s   ratio " << read_fresh / fresh_load << " (to raw read " << read / fresh_load
            << ")\n"
            << "weights read+sum: mmap " << mapped << " s, read() copy " << copied
            << " s   copy/mmap time ratio " << copied / mapped << "\n"
            << "weights only: load_checkpoint_in_model " << weights_gb / weights_load
            << " GB/s   ratio to raw read " << (weights_gb / weights_load) / (gb / read) << "\n"
            << "optimizer only: in load_state (load_state - weights) " << (gb - weights_gb) / (load - weights_load)
            << " GB/s   ratio to raw read " << ((gb - weights_gb) / (load - weights_load)) / (gb / read) << "\n"
            << "optimizer only: libtorch archive (before)             " << archive_gb / archive_load
            << " GB/s   ratio to raw read " << (archive_gb / archive_load) / (gb / read) << "\n";
  remove_tree(dir);
  return 0;
}
