#include "checkpoint/checksums.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <unordered_map>

#include <acc/errors.h>

#include "checkpoint/crc32c.h"
#include "checkpoint/file_io.h"

namespace fs = std::filesystem;

namespace acc::detail {
namespace {

struct Recorded {
  uint32_t crc = 0;
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

uint32_t file_crc(const std::string& path, uint64_t& size) {
  const auto file = open_file(path);
  size = file_size(file);
  std::vector<char> block(std::min<uint64_t>(size, 8u << 20));
  uint32_t crc = 0;
  for (uint64_t done = 0; done < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), size - done));
    read_exact_at(file, block.data(), n, done);
    crc = crc32c_extend(crc, block.data(), n);
    done += n;
  }
  return crc;
}

void read_manifest(const fs::path& manifest, Scope& scope) {
  std::istringstream lines(read_text_file(manifest.string()));
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    unsigned crc = 0;
    unsigned long long size = 0;
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%8x %llu %n", &crc, &size, &consumed) != 2 || consumed == 0 ||
        static_cast<size_t>(consumed) >= line.size()) {
      throw CheckpointError("acc: '" + manifest.string() + "' line " + std::to_string(number) +
                            " is not '<crc32c> <size> <file>': the checksum manifest is damaged; load an "
                            "earlier checkpoint, or turn verification off with "
                            "ProjectConfiguration().verify_checksums(false)");
    }
    scope.files[line.substr(consumed)] = Recorded{crc, size, manifest.string()};
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
    const uint32_t crc = file_crc(full, size);
    text += hex(crc) + " " + std::to_string(size) + " " + full.substr(prefix.size()) + "\n";
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
  const uint32_t crc = crc32c_extend(0, data, size);
  if (crc != recorded.crc) {
    throw CheckpointError("acc: checkpoint file '" + path + "' is damaged: its CRC-32C is " + hex(crc) +
                          " but save_state recorded " + hex(recorded.crc) + " (" + recorded.manifest +
                          "): bytes changed on disk or in a copy" + fix);
  }
}

std::string read_checkpoint_file(const std::string& path) {
  std::string bytes = read_text_file(path);
  verify_checkpoint_file(path, bytes.data(), bytes.size());
  return bytes;
}

}  // namespace acc::detail
