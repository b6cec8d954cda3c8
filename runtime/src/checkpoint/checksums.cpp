#include "checkpoint/checksums.h"

#include <sys/mman.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <unordered_map>

#include <acc/errors.h>

#include "base/crc32c.h"
#include "checkpoint/file_io.h"

namespace fs = std::filesystem;

namespace acc::detail {
namespace {

// Files are checksummed in chunks of this size, each chunk on its own thread (at::parallel_for):
// one CRC stream runs at a few GB/s, the memory system at several times that.
constexpr uint64_t kChunk = 16u << 20;

struct Recorded {
  std::vector<uint32_t> crcs;  // one per kChunk bytes
  uint64_t size = 0;
  std::string manifest;
};

struct Scope {
  std::string directory;  // normalised, without a trailing '/'
  std::unordered_map<std::string, Recorded> files;
};

// One per thread: load_state runs on the thread that called it, and nothing it reads spawns threads.
thread_local Scope* current = nullptr;

std::string normalised(const std::string& path) {
  std::string out = fs::path(path).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string hex(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08" PRIx32, crc);
  return text;
}

std::string hex_list(const std::vector<uint32_t>& crcs) {
  std::string out;
  for (uint32_t crc : crcs) out += (out.empty() ? "" : ",") + hex(crc);
  return out.empty() ? hex(0) : out;
}

// The CRC of each kChunk bytes of `data`, chunks in parallel.
std::vector<uint32_t> chunk_crcs(const void* data, uint64_t size) {
  std::vector<uint32_t> crcs(std::max<uint64_t>(1, (size + kChunk - 1) / kChunk));
  const auto* bytes = static_cast<const char*>(data);
  at::parallel_for(0, static_cast<int64_t>(crcs.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t offset = static_cast<uint64_t>(i) * kChunk;
      crcs[i] = crc32c_extend(0, bytes + offset, static_cast<size_t>(std::min(kChunk, size - std::min(size, offset))));
    }
  });
  return crcs;
}

// Read through a private mapping: no copy, and the pages stay cached for the reader that follows.
std::vector<uint32_t> file_crcs(const std::string& path, uint64_t& size) {
  const auto file = open_file(path);
  size = file_size(file);
  if (size == 0) return chunk_crcs(nullptr, 0);
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  if (address == MAP_FAILED) throw_system_error("mmap", path);
  std::vector<uint32_t> crcs;
  try {
    crcs = chunk_crcs(address, size);
  } catch (...) {
    ::munmap(address, size);
    throw;
  }
  ::munmap(address, size);
  return crcs;
}

void read_manifest(const fs::path& manifest, Scope& scope) {
  std::istringstream lines(read_text_file(manifest.string()));
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::istringstream fields(line);
    std::string crcs, size;
    fields >> crcs >> size;
    const auto name_at = line.find(' ', line.find(' ') + 1);
    Recorded recorded{{}, 0, manifest.string()};
    bool valid = !size.empty() && name_at != std::string::npos && name_at + 1 < line.size() &&
                 size.find_first_not_of("0123456789") == std::string::npos;
    for (size_t at = 0; valid && at < crcs.size(); at += 9) {
      valid = crcs.size() >= at + 8 && (at + 8 == crcs.size() || crcs[at + 8] == ',') &&
              crcs.substr(at, 8).find_first_not_of("0123456789abcdef") == std::string::npos;
      if (valid) recorded.crcs.push_back(static_cast<uint32_t>(std::stoul(crcs.substr(at, 8), nullptr, 16)));
    }
    if (!valid || recorded.crcs.empty()) {
      throw CheckpointError("acc: '" + manifest.string() + "' line " + std::to_string(number) +
                            " is not '<crc32c> <size> <file>': the checksum manifest is damaged; load an "
                            "earlier checkpoint, or turn verification off with "
                            "ProjectConfiguration().verify_checksums(false)");
    }
    recorded.size = std::stoull(size);
    scope.files[line.substr(name_at + 1)] = std::move(recorded);
  }
}

}  // namespace

std::string checksum_manifest_name(int rank) { return "checksums_" + std::to_string(rank) + ".txt"; }

void write_checksum_manifest(const std::string& directory, const std::vector<std::string>& paths,
                             const std::string& manifest) {
  const std::string prefix = normalised(directory) + "/";
  std::string text;
  for (const auto& path : paths) {
    const std::string full = normalised(path);
    if (full.compare(0, prefix.size(), prefix) != 0) continue;  // not in the checkpoint
    uint64_t size = 0;
    const auto crcs = file_crcs(full, size);
    text += hex_list(crcs) + " " + std::to_string(size) + " " + full.substr(prefix.size()) + "\n";
  }
  write_text_file(manifest, text);
}

ChecksumVerification::ChecksumVerification(const std::string& directory, bool enabled) {
  if (!enabled) return;
  auto scope = std::make_unique<Scope>();
  scope->directory = normalised(directory);
  for (const auto& entry : fs::directory_iterator(scope->directory)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checksums_", 0) == 0 && entry.path().extension() == ".txt") read_manifest(entry.path(), *scope);
  }
  current = scope.release();
}

ChecksumVerification::~ChecksumVerification() {
  delete current;
  current = nullptr;
}

void verify_checkpoint_file(const std::string& path, const void* data, size_t size) {
  if (current == nullptr) return;
  const std::string full = normalised(path);
  const std::string prefix = current->directory + "/";
  if (full.compare(0, prefix.size(), prefix) != 0) return;
  const auto found = current->files.find(full.substr(prefix.size()));
  if (found == current->files.end()) return;
  const Recorded& recorded = found->second;
  const std::string fix = "; load an earlier checkpoint (or, to load it anyway, ProjectConfiguration()"
                          ".verify_checksums(false))";
  if (size != recorded.size) {
    throw CheckpointError("acc: checkpoint file '" + path + "' is " + std::to_string(size) + " bytes but save_state wrote " +
                          std::to_string(recorded.size) + " (" + recorded.manifest + "): it was cut short or replaced" + fix);
  }
  const auto crcs = chunk_crcs(data, size);
  for (size_t i = 0; i < crcs.size(); ++i) {
    if (i >= recorded.crcs.size() || crcs[i] != recorded.crcs[i]) {
      throw CheckpointError("acc: checkpoint file '" + path + "' is damaged: its CRC-32C is " + hex(crcs[i]) +
                            " but save_state recorded " + (i < recorded.crcs.size() ? hex(recorded.crcs[i]) : "none") +
                            " (bytes " + std::to_string(i * kChunk) + "-" +
                            std::to_string(std::min<uint64_t>(size, (i + 1) * kChunk)) + ", " + recorded.manifest +
                            "): bytes changed on disk or in a copy" + fix);
    }
  }
}

std::string read_checkpoint_file(const std::string& path) {
  std::string bytes = read_text_file(path);
  verify_checkpoint_file(path, bytes.data(), bytes.size());
  return bytes;
}

}  // namespace acc::detail
