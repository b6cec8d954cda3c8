// acc_common/path_kind.h, the look before a path the user named is opened or exec'd: what each kind of
// node is called, and regular files read without blocking on anything else.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <acc_common/path_kind.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "test_process.h"

namespace acc::common {
namespace {

TEST(PathKind, NamesEachKindOfNode) {
  const std::string dir = launcher::testing::temp_dir("path-kind");
  std::ofstream(dir + "/file") << "text";
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  ASSERT_EQ(symlink("fifo", (dir + "/to-fifo").c_str()), 0);
  ASSERT_EQ(symlink("nowhere", (dir + "/dangling").c_str()), 0);
  EXPECT_EQ(inspect_path(dir + "/file").description(), "a regular file");
  EXPECT_TRUE(inspect_path(dir + "/file").regular());
  EXPECT_EQ(inspect_path(dir).description(), "a directory");
  EXPECT_TRUE(inspect_path(dir).directory());
  EXPECT_EQ(inspect_path(dir + "/fifo").description(), "a named pipe (FIFO)");
  EXPECT_EQ(inspect_path(dir + "/to-fifo").description(), "a symbolic link to a named pipe (FIFO)");
  EXPECT_EQ(inspect_path("/dev/null").description(), "a character device");
  EXPECT_EQ(inspect_path(dir + "/dangling").description(), "a dangling symbolic link");
  EXPECT_EQ(inspect_path(dir + "/missing").description(), "missing");
  EXPECT_FALSE(inspect_path(dir + "/missing").exists());
  EXPECT_EQ(inspect_path(dir + "/file/below").error, ENOTDIR);
}

TEST(PathKind, ReadsOnlyRegularFilesAndNeverBlocks) {
  const std::string dir = launcher::testing::temp_dir("path-kind-read");
  std::ofstream(dir + "/file") << "0123456789";
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  std::string problem;
  EXPECT_EQ(read_regular_file(dir + "/file", 10, &problem), "0123456789");
  EXPECT_EQ(read_regular_file(dir + "/file", 9, &problem), std::nullopt);
  EXPECT_EQ(problem, "is over 9 bytes");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(read_regular_file(dir + "/fifo", 10, &problem), std::nullopt);  // opening it would wait for a writer
  EXPECT_EQ(problem, "is a named pipe (FIFO), not a regular file");
  EXPECT_EQ(read_regular_file("/dev/zero", 10, &problem), std::nullopt);  // reading it would never end
  EXPECT_EQ(problem, "is a character device, not a regular file");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_EQ(read_regular_file(dir, 10, &problem), std::nullopt);
  EXPECT_EQ(problem, "is a directory, not a regular file");
  EXPECT_EQ(read_regular_file(dir + "/missing", 10, &problem), std::nullopt);
  EXPECT_EQ(problem, "does not exist");
}

}  // namespace
}  // namespace acc::common
