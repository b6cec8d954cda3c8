#include <gtest/gtest.h>

#include <acc_common/job_id.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace {

using acc::common::new_job_id;

TEST(JobId, FreshLowerCaseHex) {
  const std::string a = new_job_id(), b = new_job_id();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

// The launcher's copy took one getrandom call for all 8 bytes and failed on a short read or EINTR.
TEST(JobId, ShortReadsAndInterruptionsAreRetried) {
  const uint8_t bytes[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  size_t given = 0;
  int calls = 0;
  const std::string id = new_job_id([&](uint8_t* buffer, size_t length) -> ssize_t {
    ++calls;
    if (calls % 3 == 2) {  // every third call is interrupted by a signal
      errno = EINTR;
      return -1;
    }
    EXPECT_EQ(length, sizeof(bytes) - given);  // asks only for what is still missing
    buffer[0] = bytes[given++];                // one byte at a time
    return 1;
  });
  EXPECT_EQ(id, "0123456789abcdef");
  EXPECT_EQ(given, sizeof(bytes));
}

TEST(JobId, OtherErrorsAreThrownWithTheirReason) {
  try {
    new_job_id([](uint8_t*, size_t) -> ssize_t {
      errno = ENOSYS;
      return -1;
    });
    ADD_FAILURE() << "expected a system_error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOSYS);
    EXPECT_EQ(std::string(e.what()), std::string("getrandom: ") + std::strerror(ENOSYS));
  }
}

}  // namespace
