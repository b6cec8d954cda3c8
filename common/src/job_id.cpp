#include <acc_common/job_id.h>

#include <sys/random.h>

#include <cerrno>
#include <system_error>

namespace acc::common {

std::string new_job_id() {
  return new_job_id([](uint8_t* buffer, size_t length) { return ::getrandom(buffer, length, 0); });
}

std::string new_job_id(const RandomSource& draw) {
  uint8_t bytes[8];
  size_t got = 0;
  // The source may give fewer bytes than asked, or fail with EINTR when a signal arrives (Ctrl-C while a
  // launcher starts): both mean "ask again for the rest".
  while (got < sizeof(bytes)) {
    const ssize_t n = draw(bytes + got, sizeof(bytes) - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    got += static_cast<size_t>(n);
  }
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (uint8_t b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

}  // namespace acc::common
