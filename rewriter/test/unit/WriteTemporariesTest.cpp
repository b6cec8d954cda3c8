// The temporaries acc-migrate writes files through (WriteTemporaries.h): a killed writer's are
// removed, a live writer's stay (another process, as a concurrent acc-migrate), and nothing else is
// touched: look-alike names, links (nor what they point to), directories, FIFOs, another user's
// files, files below the directory. Each test works in a directory of its own under $TMPDIR.
#include "output/WriteTemporaries.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

using namespace accmigrate;
namespace fs = llvm::sys::fs;

namespace {

const char kHex[] = "0123456789abcdef";

// A process that is alive until the test ends it: a writer still writing its temporary.
class LiveProcess {
 public:
  LiveProcess() {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {  // blocks until the parent closes its end (or dies): never outlives the test
      ::close(fds[1]);
      char byte;
      while (::read(fds[0], &byte, 1) > 0) {}
      ::_exit(0);
    }
    ::close(fds[0]);
    release_ = fds[1];
  }
  ~LiveProcess() {
    ::close(release_);
    int status;
    if (pid_ > 0) ::waitpid(pid_, &status, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
};

// A pid that was a process of this machine and is no more: a child, exited and reaped.
pid_t deadPid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status;
  ::waitpid(child, &status, 0);
  return child;
}

// A temporary's name as a writer with pid `pid` on `host` makes it for `file`.
std::string temporaryOf(const std::string &file, long pid, const std::string &host = hostTag()) {
  return file + ".acc-migrate-" + host + "." + std::to_string(pid) + "." + kHex;
}

class WriteTemporariesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(fs::createUniqueDirectory("write-temporaries-test", dir));
    dir_ = std::string(dir);
  }
  // std::filesystem: llvm's remove_directories leaves a FIFO (and so its directory) behind.
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string at(const std::string &name) const { return dir_ + "/" + name; }
  void write(const std::string &name, const std::string &text = "") const {
    std::ofstream out(at(name), std::ios::binary);
    out << text;
  }
  bool exists(const std::string &name) const {  // the name itself, a dangling link included
    fs::file_status status;
    return !fs::status(at(name), status, /*Follow=*/false);
  }
  void setAge(const std::string &name, std::chrono::hours age) const {
    auto when = std::chrono::system_clock::now() - age;
    timespec times[2];
    times[0].tv_sec = times[1].tv_sec = std::chrono::system_clock::to_time_t(when);
    times[0].tv_nsec = times[1].tv_nsec = 0;
    ASSERT_EQ(::utimensat(AT_FDCWD, at(name).c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << name;
  }
  // The names removeDeadWriteTemporaries removed, and why.
  std::map<std::string, std::string> removeDead() const {
    std::map<std::string, std::string> names;
    for (const RemovedTemporary &removed : removeDeadWriteTemporaries(dir_)) {
      EXPECT_EQ(removed.path.rfind(dir_ + "/", 0), 0u) << removed.path;
      names[removed.path.substr(dir_.size() + 1)] = removed.why;
    }
    return names;
  }

  std::string dir_;
};

// The name this process writes a file's new text to names it, so that a later run can tell.
TEST(WriteTemporaryNames, NameTheirWriter) {
  std::string name = writeTemporaryPrefix("train.cpp") + kHex;
  std::optional<std::optional<Writer>> parsed = parseWriteTemporary(name);
  ASSERT_TRUE(parsed && *parsed) << name;
  EXPECT_EQ((*parsed)->host, hostTag());
  EXPECT_EQ((*parsed)->pid, ::getpid());
  EXPECT_EQ(name, "train.cpp.acc-migrate-" + hostTag() + "." + std::to_string(::getpid()) + "." + kHex);
  // The host part never holds the '.' that separates the parts.
  EXPECT_EQ(hostTag().find('.'), std::string::npos) << hostTag();
  // The naming before this version: acc-migrate's, without a writer.
  parsed = parseWriteTemporary(std::string("train.cpp.acc-migrate-") + kHex);
  ASSERT_TRUE(parsed);
  EXPECT_FALSE(*parsed);
}

// Only the exact pattern is acc-migrate's: anything near it belongs to someone else.
TEST(WriteTemporaryNames, LookAlikesAreNotTemporaries) {
  const std::string hex = kHex, host = hostTag();
  for (const std::string &name : std::vector<std::string>{
           "train.cpp.acc-migrate-" + host + ".42." + hex.substr(0, 15),         // 15 digits
           "train.cpp.acc-migrate-" + host + ".42." + hex + "0",                 // 17
           "train.cpp.acc-migrate-" + host + ".42.0123456789ABCDEF",             // upper case
           "train.cpp.acc-migrate-" + host + ".42." + hex + ".bak",              // something after
           "train.cpp.acc-migrate-" + host + ".4x2." + hex,                      // not a pid
           "train.cpp.acc-migrate-" + host + "." + hex,                          // no pid
           ".acc-migrate-" + host + ".42." + hex,                                // no file name
           ".acc-migrate-" + hex,                                                //
           "train.cpp.acc-migrate-" + hex.substr(0, 15),                         // older naming, 15
           std::string("train.cpp.acc-migrate-0123456789abcdeg"),                // not hex
           "train.cpp.acc_migrate-" + host + ".42." + hex,                       // '_'
           "train.cpp-acc-migrate-" + host + ".42." + hex,                       // '-' for '.'
           "train.cpp.acc-migrate-" + host + ".42." + hex + "\n",                // a newline after
           "train.cpp." + host + ".42." + hex + ".tmp",                          // a PCH temporary's
       })
    EXPECT_FALSE(parseWriteTemporary(name)) << name;
}

// The reproduction of issue 35 item 9: a run killed before its rename leaves its temporary (full or
// partial); the next run removes it and says why. A temporary whose writer is alive stays: another
// process (two acc-migrate runs on one tree at once) or this one.
TEST_F(WriteTemporariesTest, DeadWritersTemporariesAreRemovedLiveWritersStay) {
  LiveProcess writer;
  ASSERT_GT(writer.pid(), 0);
  const pid_t dead = deadPid();
  const std::string killed = temporaryOf("train.cpp", dead), backup = temporaryOf("train.cpp.orig", dead),
                    live = temporaryOf("train.cpp", writer.pid()), mine = temporaryOf("model.h", ::getpid());
  write(killed, "the migrated text, never renamed over train.cpp\n");
  write(backup);
  write(live, "being written");
  write(mine);

  std::map<std::string, std::string> removed = removeDead();
  const std::string why = "process " + std::to_string(dead) + " of this machine has exited";
  EXPECT_EQ(removed, (std::map<std::string, std::string>{{killed, why}, {backup, why}}));
  EXPECT_FALSE(exists(killed));
  EXPECT_FALSE(exists(backup));
  EXPECT_TRUE(exists(live)) << "a live writer's temporary was removed";
  EXPECT_TRUE(exists(mine)) << "this process's temporary was removed";
}

// A pid of another machine means nothing here, and the older naming has no pid: those go when a day
// old, as does one named for a pid that a later process has taken (its writer wrote nothing for a day).
TEST_F(WriteTemporariesTest, UnaskableWritersTemporariesAreRemovedWhenADayOld) {
  LiveProcess reused;
  ASSERT_GT(reused.pid(), 0);
  const std::string otherHostFresh = temporaryOf("train.cpp", 42, "other-host"),
                    olderFresh = std::string("train.cpp.acc-migrate-") + kHex,
                    otherHostOld = temporaryOf("model.h", 42, "other-host"),
                    olderOld = std::string("model.h.acc-migrate-") + kHex,
                    reusedOld = temporaryOf("data.h", reused.pid());
  for (const std::string &name : {otherHostFresh, olderFresh, otherHostOld, olderOld, reusedOld}) write(name);
  for (const std::string &name : {otherHostOld, olderOld, reusedOld}) setAge(name, std::chrono::hours(25));
  setAge(otherHostFresh, std::chrono::hours(23));

  std::map<std::string, std::string> removed = removeDead();
  const std::string why = "it is over a day old";
  EXPECT_EQ(removed, (std::map<std::string, std::string>{{otherHostOld, why}, {olderOld, why}, {reusedOld, why}}));
  EXPECT_TRUE(exists(otherHostFresh));
  EXPECT_TRUE(exists(olderFresh));
}

// Named as a dead writer's temporary but not a regular file of this user, or not in the directory
// itself: never removed, and a link is not followed (its target keeps its bytes).
TEST_F(WriteTemporariesTest, OnlyThisUsersRegularFilesInTheDirectoryAreRemoved) {
  const pid_t dead = deadPid();
  const std::string victim = at("victim");
  write("victim", "the victim's own bytes\n");
  const std::string link = temporaryOf("link.cpp", dead), dangling = temporaryOf("dangling.cpp", dead),
                    directory = temporaryOf("dir", dead), fifo = temporaryOf("fifo.cpp", dead),
                    below = "sub/" + temporaryOf("train.cpp", dead), dayOldLink = temporaryOf("old.cpp", dead);
  ASSERT_FALSE(fs::create_link(victim, at(link)));
  ASSERT_FALSE(fs::create_link(at("absent"), at(dangling)));
  ASSERT_FALSE(fs::create_link(victim, at(dayOldLink)));
  setAge(dayOldLink, std::chrono::hours(25));
  ASSERT_FALSE(fs::create_directories(at(directory)));
  ASSERT_EQ(::mkfifo(at(fifo).c_str(), 0600), 0);
  ASSERT_FALSE(fs::create_directories(at("sub")));
  write(below);
  std::vector<std::string> kept = {link, dangling, dayOldLink, directory, fifo, below};
  // Another user's file (a shared, group-writable tree): only root can make one.
  const std::string others = temporaryOf("others.cpp", dead);
  if (::geteuid() == 0) {
    write(others);
    ASSERT_EQ(::chown(at(others).c_str(), 65534, 65534), 0);
    kept.push_back(others);
  }

  EXPECT_TRUE(removeDead().empty());
  for (const std::string &name : kept) EXPECT_TRUE(exists(name)) << name;
  auto text = llvm::MemoryBuffer::getFile(victim);
  ASSERT_TRUE(text);
  EXPECT_EQ((*text)->getBuffer(), "the victim's own bytes\n");
  if (::geteuid() != 0) GTEST_SKIP() << "another user's file: needs root to create one (the rest passed)";
}

// A directory that cannot be read removes nothing and reports nothing: writing there reports it.
TEST_F(WriteTemporariesTest, AMissingDirectoryRemovesNothing) {
  EXPECT_TRUE(removeDeadWriteTemporaries(at("absent")).empty());
  write("file");
  EXPECT_TRUE(removeDeadWriteTemporaries(at("file")).empty());
}

}  // namespace
