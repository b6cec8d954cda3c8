// Links planted where a writer could be redirected: the victim stays untouched, the target becomes a
// regular file, and no temporary is left behind.
#include "acc_common/new_file.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

class NewFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/acc-new-file-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string read(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  std::vector<std::string> entries() {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir_.c_str());
    while (auto* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
    return out;
  }
  std::string dir_;
};

TEST_F(NewFileTest, ReplaceFileReplacesALinkAtTheTargetNotItsVictim) {
  const std::string victim = dir_ + "/victim";
  std::ofstream(victim) << "precious";
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/config.yaml").c_str()), 0);
  // The predictable temporaries of naive writers, planted too.
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/config.yaml.tmp").c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/.config.yaml.tmp").c_str()), 0);

  EXPECT_EQ(acc::common::replace_file(dir_ + "/config.yaml", "new: 1\n"), "");

  EXPECT_EQ(read(victim), "precious");
  struct stat st {};
  ASSERT_EQ(::lstat((dir_ + "/config.yaml").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(read(dir_ + "/config.yaml"), "new: 1\n");
  EXPECT_EQ(entries().size(), 4u) << "a temporary was left behind";
}

TEST_F(NewFileTest, CreatedNamesAreRandomHiddenAndExclusive) {
  auto a = acc::common::create_file_beside(dir_ + "/model.safetensors");
  auto b = acc::common::create_file_beside(dir_ + "/model.safetensors");
  ASSERT_GE(a.fd, 0);
  ASSERT_GE(b.fd, 0);
  EXPECT_NE(a.path, b.path);
  EXPECT_EQ(a.path.rfind(dir_ + "/.model.safetensors.", 0), 0u) << a.path;
  ::close(a.fd);
  ::close(b.fd);
}

TEST_F(NewFileTest, PrefixedNamesRefuseALinkPlantedAtEveryName) {
  // A writer with its own naming scheme: the name is prefix + 16 hex + suffix, and O_EXCL|O_NOFOLLOW
  // holds for it as for the hidden names.
  const std::string victim = dir_ + "/victim";
  std::ofstream(victim) << "precious";
  auto file = acc::common::create_file_with_prefix(dir_ + "/key.pch.host.42.", ".tmp", 0644);
  ASSERT_GE(file.fd, 0);
  EXPECT_EQ(file.path.size(), (dir_ + "/key.pch.host.42.").size() + 16 + 4) << file.path;
  EXPECT_EQ(acc::common::write_new_file(file, "bytes", 5), "");
  EXPECT_EQ(acc::common::commit_new_file(file, dir_ + "/key.pch"), "");
  EXPECT_EQ(read(dir_ + "/key.pch"), "bytes");

  auto abandoned = acc::common::create_file_with_prefix(dir_ + "/other.", "");
  ASSERT_GE(abandoned.fd, 0);
  const std::string path = abandoned.path;
  acc::common::abandon_new_file(abandoned);
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "an abandoned file was left behind";
  EXPECT_EQ(read(victim), "precious");
}

TEST_F(NewFileTest, ReplaceFileNamesTheDirectoryItCannotWriteTo) {
  const std::string error = acc::common::replace_file(dir_ + "/missing/config.yaml", "x");
  EXPECT_NE(error.find(dir_ + "/missing/config.yaml"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
}

TEST_F(NewFileTest, DirectoriesBesideATargetAreNewAndDistinct) {
  const auto a = acc::common::create_directory_beside(dir_ + "/checkpoint_3", ".tmp-");
  const auto b = acc::common::create_directory_beside(dir_ + "/checkpoint_3", ".tmp-");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(dir_ + "/.checkpoint_3.tmp-", 0), 0u) << a;
  struct stat st {};
  ASSERT_EQ(::lstat(a.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(RandomHex, HasTheLengthAskedAndVaries) {
  EXPECT_EQ(acc::common::random_hex(8).size(), 16u);
  EXPECT_NE(acc::common::random_hex(8), acc::common::random_hex(8));
}

}  // namespace
