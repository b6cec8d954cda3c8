// The PCH cache's files (PchCache.h): nothing it writes follows a link planted at a name it uses,
// temporaries of dead writers are removed when it is opened (a live writer's stay), and it is kept
// under its size limit, least recently used out first. The PCHs built here are of a stand-in
// <torch/torch.h> of one line (milliseconds), not of torch: what is tested is where bytes go.
#include "project/PchCache.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <fstream>

using namespace accmigrate;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace {

const char kVictimText[] = "the victim's own bytes\n";

class PchCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(fs::createUniqueDirectory("pch-cache-test", dir));
    fs::real_path(dir, root_);
    cache_ = std::string(root_) + "/cache";
    ASSERT_FALSE(fs::create_directories(cache_));
    ASSERT_FALSE(fs::create_directories(std::string(root_) + "/stub/torch"));
    write(std::string(root_) + "/stub/torch/torch.h",
          "#pragma once\nnamespace torch { inline int stub() { return 1; } }\n");
  }
  void TearDown() override { fs::remove_directories(root_); }

  // A command that compiles against the stand-in torch; `define` makes its flags (so its key) differ.
  clang::tooling::CompileCommand command(const std::string &define = "") const {
    clang::tooling::CompileCommand c;
    c.Directory = std::string(root_);
    c.Filename = std::string(root_) + "/train.cpp";
    c.CommandLine = {"clang-tool", "-std=c++17", "-isystem", std::string(root_) + "/stub"};
    if (!define.empty()) c.CommandLine.push_back("-D" + define);
    c.CommandLine.push_back(c.Filename);
    return c;
  }

  static void write(const std::string &file, const std::string &text) {
    std::ofstream out(file, std::ios::binary);
    out << text;
  }
  static std::string read(const std::string &file) {
    auto buffer = llvm::MemoryBuffer::getFile(file);
    return buffer ? (*buffer)->getBuffer().str() : "<unreadable>";
  }
  static bool isRegularFile(const std::string &file) {
    fs::file_status status;
    return !fs::status(file, status, /*Follow=*/false) && fs::is_regular_file(status);
  }
  static bool exists(const std::string &file) {  // the name itself, a dangling link included
    fs::file_status status;
    return !fs::status(file, status, /*Follow=*/false);
  }
  static void setAge(const std::string &file, std::chrono::seconds age) {
    int fd;
    ASSERT_FALSE(fs::openFileForWrite(file, fd, fs::CD_OpenExisting, fs::OF_Append));
    auto when = std::chrono::system_clock::now() - age;
    EXPECT_FALSE(fs::setLastAccessAndModificationTime(fd, when, when));
    ::close(fd);
  }
  static std::chrono::seconds age(const std::string &file) {
    fs::file_status status;
    EXPECT_FALSE(fs::status(file, status, /*Follow=*/false));
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() -
                                                            status.getLastModificationTime());
  }
  // The key of the stand-in command: the name of the PCH a first cache builds (then removed).
  std::string keyOf(const clang::tooling::CompileCommand &c) {
    PchCache first(cache_, {});
    std::string pch = first.pchFor(c);
    EXPECT_FALSE(pch.empty()) << "the stand-in <torch/torch.h> did not precompile";
    fs::remove(pch);
    return path::stem(pch).str();
  }
  // A pid that was a process of this machine and is no more: a child, exited and reaped.
  static pid_t deadPid() {
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status;
    ::waitpid(child, &status, 0);
    return child;
  }

  llvm::SmallString<128> root_;
  std::string cache_;
};

// strace of acc-migrate before the fix: torch-prefix.h opened O_WRONLY|O_CREAT|O_TRUNC (a link there
// is followed), the PCH written by clang to <key>.pch.tmp<pid> (its pid: predictable), renamed to
// <key>.pch. Links planted at those names leave their targets as they were.
TEST_F(PchCacheTest, LinksAtPredictableNamesAreNotFollowed) {
  clang::tooling::CompileCommand c = command();
  std::string key = keyOf(c);
  ASSERT_FALSE(key.empty());
  fs::remove(cache_ + "/torch-prefix.h");
  std::string victim = std::string(root_) + "/victim", absent = std::string(root_) + "/not-yet";
  write(victim, kVictimText);
  ASSERT_FALSE(fs::create_link(absent, cache_ + "/torch-prefix.h"));  // dangling: O_CREAT would make it
  ASSERT_FALSE(fs::create_link(victim, cache_ + "/" + key + ".pch.tmp" + std::to_string(::getpid())));

  PchCache cache(cache_, {});
  std::string pch = cache.pchFor(c);
  EXPECT_EQ(pch, cache_ + "/" + key + ".pch");
  EXPECT_EQ(read(victim), kVictimText);
  EXPECT_FALSE(exists(absent)) << "the prefix header was written through the link planted at its name";
  EXPECT_TRUE(isRegularFile(cache_ + "/torch-prefix.h"));
  EXPECT_TRUE(isRegularFile(pch));
}

// A link at the PCH's own name is not a cached PCH: it is replaced by one, its target untouched.
TEST_F(PchCacheTest, LinkAtThePchsNameIsReplaced) {
  clang::tooling::CompileCommand c = command();
  std::string key = keyOf(c);
  ASSERT_FALSE(key.empty());
  std::string victim = std::string(root_) + "/victim";
  write(victim, kVictimText);
  ASSERT_FALSE(fs::create_link(victim, cache_ + "/" + key + ".pch"));

  std::string pch = PchCache(cache_, {}).pchFor(c);
  EXPECT_EQ(pch, cache_ + "/" + key + ".pch");
  EXPECT_EQ(read(victim), kVictimText);
  EXPECT_TRUE(isRegularFile(pch));
  EXPECT_NE(read(pch), kVictimText);
}

// Opening the cache removes the temporaries of writers that are dead (here, of this version and of
// the versions before it, which named the writer the same way); a live writer's stays.
TEST_F(PchCacheTest, TemporariesOfDeadWritersAreRemovedWhenOpened) {
  const std::string key = "0123456789abcdef0123456789abcdef";
  std::string dead = std::to_string(deadPid()), live = std::to_string(::getpid());
  std::vector<std::string> stale = {key + ".pch.tmp" + dead, key + ".pch-1a2b3c4d.tmp" + dead + ".tmp",
                                    pchTemporaryPrefix(key, ::atoi(dead.c_str())) + "0123456789abcdef.tmp"};
  std::vector<std::string> kept = {key + ".pch.tmp" + live, key + ".pch-1a2b3c4d.tmp" + live + ".tmp",
                                   pchTemporaryPrefix(key, ::getpid()) + "0123456789abcdef.tmp",
                                   // another machine's writer (a cache on a shared home): its pid means
                                   // nothing here
                                   key + ".pch.other-host." + dead + ".0123456789abcdef.tmp",
                                   // not a name the cache makes
                                   "notes.tmp" + dead, key + ".pch"};
  for (const std::string &name : stale) write(cache_ + "/" + name, "");
  for (const std::string &name : kept) write(cache_ + "/" + name, "");

  PchCache cache(cache_, {});
  for (const std::string &name : stale) EXPECT_FALSE(exists(cache_ + "/" + name)) << name;
  for (const std::string &name : kept) EXPECT_TRUE(exists(cache_ + "/" + name)) << name;
}

// A temporary older than a day is dead whoever wrote it (a PCH is written in seconds): another
// machine's, or one whose pid a later process took.
TEST_F(PchCacheTest, DayOldTemporariesAreRemovedWhenOpened) {
  const std::string key = "0123456789abcdef0123456789abcdef";
  std::vector<std::string> names = {key + ".pch.other-host.1.0123456789abcdef.tmp",
                                    pchTemporaryPrefix(key, ::getpid()) + "0123456789abcdef.tmp"};
  for (const std::string &name : names) {
    write(cache_ + "/" + name, "");
    setAge(cache_ + "/" + name, std::chrono::hours(25));
  }
  PchCache cache(cache_, {});
  for (const std::string &name : names) EXPECT_FALSE(exists(cache_ + "/" + name)) << name;
}

// Over the limit, the least recently used PCHs go until the rest fits; those in use stay.
TEST_F(PchCacheTest, TrimRemovesLeastRecentlyUsedFirstAndKeepsThoseInUse) {
  std::vector<std::string> pchs;
  for (char c : std::string("abcde")) {
    pchs.push_back(cache_ + "/" + std::string(32, c) + ".pch");
    write(pchs.back(), std::string(1000, 'x'));
    setAge(pchs.back(), std::chrono::seconds(100 * ('f' - c)));  // a oldest, e newest
  }
  write(cache_ + "/torch-prefix.h", std::string(5000, ' '));  // not a PCH: neither counted nor removed
  trimPchCache(cache_, 2500, {pchs[0]});
  EXPECT_TRUE(exists(pchs[0])) << "in use";
  EXPECT_FALSE(exists(pchs[1]));
  EXPECT_FALSE(exists(pchs[2]));
  EXPECT_FALSE(exists(pchs[3]));
  EXPECT_TRUE(exists(pchs[4])) << "the newest fits";
  EXPECT_TRUE(exists(cache_ + "/torch-prefix.h"));
}

// Adding a PCH trims the cache; the PCHs this cache handed out stay even over the limit.
TEST_F(PchCacheTest, BuildingTrimsTheCacheButNotThisRunsPchs) {
  std::string old = cache_ + "/" + std::string(32, 'a') + ".pch";
  write(old, std::string(1000, 'x'));
  setAge(old, std::chrono::hours(1));
  PchCache cache(cache_, {}, /*limitBytes=*/1);
  std::string first = cache.pchFor(command("FIRST"));
  ASSERT_FALSE(first.empty());
  EXPECT_FALSE(exists(old));
  std::string second = cache.pchFor(command("SECOND"));
  ASSERT_FALSE(second.empty());
  EXPECT_NE(first, second);
  EXPECT_TRUE(isRegularFile(first));
  EXPECT_TRUE(isRegularFile(second));
}

// A PCH is marked used (its mtime: atime is not kept under noatime, and relatime updates it once a
// day at most) when a run first takes it, so that trimming removes those not used for longest.
TEST_F(PchCacheTest, TakingAPchRefreshesItsTime) {
  std::string pch = PchCache(cache_, {}).pchFor(command());
  ASSERT_FALSE(pch.empty());
  setAge(pch, std::chrono::hours(48));
  EXPECT_EQ(PchCache(cache_, {}).pchFor(command()), pch);
  EXPECT_LT(age(pch).count(), 60);
}

TEST(PchCacheLimit, Sizes) {
  EXPECT_EQ(parsePchCacheSize("4096"), 4096u);
  EXPECT_EQ(parsePchCacheSize("64K"), 64u << 10);
  EXPECT_EQ(parsePchCacheSize("500M"), 500ull << 20);
  EXPECT_EQ(parsePchCacheSize("2G"), 2ull << 30);
  EXPECT_EQ(parsePchCacheSize("2g"), 2ull << 30);
  EXPECT_EQ(parsePchCacheSize("2GB"), std::nullopt);
  EXPECT_EQ(parsePchCacheSize(""), std::nullopt);
  EXPECT_EQ(parsePchCacheSize("-1"), std::nullopt);
  EXPECT_EQ(parsePchCacheSize("1.5G"), std::nullopt);
  EXPECT_EQ(parsePchCacheSize("99999999999G"), std::nullopt);  // overflows 64 bits
}

}  // namespace
