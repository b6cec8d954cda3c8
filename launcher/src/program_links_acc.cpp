#include "program_links_acc.h"

#include <elf.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <vector>

#include <acc_common/path_kind.h>

#include "program_path.h"

namespace acc::launcher {
namespace {

// Programs are read whole to find their needed libraries; anything larger is taken as not linking libacc
// (a statically linked libtorch program is far below this, and cannot need libacc.so anyway).
constexpr long long kMaxProgramBytes = 4LL << 30;

// The DT_NEEDED names of a 64-bit little-endian ELF image (the platforms acc builds for).
std::vector<std::string> needed_libraries(const std::string& image) {
  std::vector<std::string> needed;
  if (image.size() < sizeof(Elf64_Ehdr) || std::memcmp(image.data(), ELFMAG, SELFMAG) != 0 ||
      image[EI_CLASS] != ELFCLASS64)
    return needed;
  Elf64_Ehdr header;
  std::memcpy(&header, image.data(), sizeof(header));
  auto in_bounds = [&](uint64_t offset, uint64_t size) { return offset <= image.size() && size <= image.size() - offset; };
  std::vector<Elf64_Phdr> segments;
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    const uint64_t at = header.e_phoff + uint64_t{i} * header.e_phentsize;
    if (!in_bounds(at, sizeof(Elf64_Phdr))) return needed;
    Elf64_Phdr segment;
    std::memcpy(&segment, image.data() + at, sizeof(segment));
    segments.push_back(segment);
  }
  // The dynamic section holds virtual addresses: map them back to file offsets through PT_LOAD.
  auto file_offset = [&](uint64_t address) -> uint64_t {
    for (const auto& s : segments)
      if (s.p_type == PT_LOAD && address >= s.p_vaddr && address < s.p_vaddr + s.p_filesz)
        return s.p_offset + (address - s.p_vaddr);
    return UINT64_MAX;
  };
  for (const auto& s : segments) {
    if (s.p_type != PT_DYNAMIC || !in_bounds(s.p_offset, s.p_filesz)) continue;
    std::vector<Elf64_Dyn> entries(s.p_filesz / sizeof(Elf64_Dyn));
    std::memcpy(entries.data(), image.data() + s.p_offset, entries.size() * sizeof(Elf64_Dyn));
    uint64_t strings = UINT64_MAX;
    for (const auto& e : entries)
      if (e.d_tag == DT_STRTAB) strings = file_offset(e.d_un.d_ptr);
    if (strings == UINT64_MAX) return needed;
    for (const auto& e : entries) {
      if (e.d_tag == DT_NULL) break;
      if (e.d_tag != DT_NEEDED || !in_bounds(strings + e.d_un.d_val, 1)) continue;
      const char* name = image.data() + strings + e.d_un.d_val;
      needed.emplace_back(name, strnlen(name, image.size() - (strings + e.d_un.d_val)));
    }
  }
  return needed;
}

}  // namespace

bool program_links_acc(const std::string& program) {
  const std::string path = find_program(program);
  if (path.empty()) return false;
  // Read only as a regular file (a FIFO would block, /dev/zero never end), and never past the largest
  // program that could plausibly link libacc: a program is mapped, not read, so this is only a bound.
  const std::optional<std::string> image = common::read_regular_file(path, kMaxProgramBytes, nullptr);
  if (!image) return false;
  for (const auto& name : needed_libraries(*image))
    if (name.rfind("libacc.so", 0) == 0) return true;
  return false;
}

}  // namespace acc::launcher
