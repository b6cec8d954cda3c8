// CMake reading (CMakeProject.h): the lexer's arguments and offsets, and targets resolved to the
// files they list.
#include "project/CMakeProject.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <fstream>

using namespace accmigrate::cmake;
namespace fs = llvm::sys::fs;

namespace {

TEST(CMakeLexer, CommandsArgumentsAndOffsets) {
  std::string text =
      "# a comment with add_executable(fake x.cpp)\n"
      "#[[ bracket comment\n add_library(fake2) ]]\n"
      "Add_Executable(app \"a b.cpp\" [=[c)d.cpp]=] e.cpp # trailing\n  f.cpp)\n"
      "if((A) OR B)\n";
  std::vector<Command> commands = parseCommands(text);
  ASSERT_EQ(commands.size(), 2u);
  const Command &add = commands[0];
  EXPECT_EQ(add.name, "add_executable");
  EXPECT_EQ(add.line, 4u);
  EXPECT_EQ(add.column, 1u);
  ASSERT_EQ(add.args.size(), 5u);
  EXPECT_EQ(add.args[1].text, "a b.cpp");
  EXPECT_TRUE(add.args[1].quoted);
  EXPECT_EQ(add.args[2].text, "c)d.cpp");
  EXPECT_EQ(text.substr(add.args[3].begin, add.args[3].end - add.args[3].begin), "e.cpp");
  EXPECT_EQ(add.args[4].text, "f.cpp");
  EXPECT_EQ(text[add.end - 1], ')');
  EXPECT_EQ(commands[1].name, "if");
  EXPECT_EQ(commands[1].args.size(), 3u);
}

TEST(CMakeLexer, FunctionBodies) {
  std::vector<Command> commands = parseCommands("function(f)\n add_executable(t a.cpp)\nendfunction()\nadd_executable(u b.cpp)\n");
  ASSERT_EQ(commands.size(), 4u);
  EXPECT_TRUE(commands[1].inFunction);
  EXPECT_FALSE(commands[3].inFunction);
}

class CMakeProjectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(fs::createUniqueDirectory("cmake-project", dir));
    fs::real_path(dir, root_);
  }
  void TearDown() override { fs::remove_directories(root_); }
  void write(const std::string &relative, const std::string &text) {
    std::string file = path(relative);
    fs::create_directories(llvm::sys::path::parent_path(file));
    std::ofstream(file) << text;
  }
  std::string path(const std::string &relative) { return std::string(root_) + "/" + relative; }
  std::vector<std::string> targetsOf(const Project &project, const std::string &relative) {
    std::vector<std::string> names;
    for (const Target *t : project.targetsOf(path(relative))) names.push_back(t->name);
    return names;
  }
  llvm::SmallString<128> root_;
};

TEST_F(CMakeProjectTest, ResolvesTargetsByFullPath) {
  write("CMakeLists.txt",
        "project(p)\nset(SOURCES src/a.cpp src/b.cpp)\nadd_executable(main main.cpp)\n"
        "add_executable(app ${SOURCES})\nadd_library(lib STATIC)\n"
        "target_sources(lib PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/c.cpp)\nadd_subdirectory(tool)\n"
        "add_executable(listed tool/extra.cpp)\n");
  write("tool/CMakeLists.txt", "add_executable(tool main.cpp ${PROJECT_SOURCE_DIR}/src/a.cpp)\n"
                               "target_link_libraries(tool PRIVATE m)\n");
  for (const char *file : {"main.cpp", "src/a.cpp", "src/b.cpp", "src/c.cpp", "tool/main.cpp", "tool/extra.cpp"})
    write(file, "");
  std::optional<Project> enclosing = Project::enclosing(path("tool/main.cpp"));
  ASSERT_TRUE(enclosing);
  EXPECT_EQ(enclosing->top, std::string(root_));
  Project project = Project::load(std::string(root_));
  EXPECT_EQ(project.files().size(), 2u);
  EXPECT_EQ(targetsOf(project, "main.cpp"), std::vector<std::string>{"main"});
  EXPECT_EQ(targetsOf(project, "tool/main.cpp"), std::vector<std::string>{"tool"});
  EXPECT_EQ(targetsOf(project, "src/a.cpp"), (std::vector<std::string>{"app", "tool"}));
  EXPECT_EQ(targetsOf(project, "src/b.cpp"), std::vector<std::string>{"app"});
  EXPECT_EQ(targetsOf(project, "src/c.cpp"), std::vector<std::string>{"lib"});
  EXPECT_EQ(targetsOf(project, "tool/extra.cpp"), std::vector<std::string>{"listed"});
  const Target *tool = project.targetsOf(path("tool/main.cpp")).front();
  EXPECT_EQ(tool->listsFile, path("tool/CMakeLists.txt"));
  ASSERT_EQ(tool->linkCalls.size(), 1u);
  EXPECT_TRUE(tool->resolved);
}

TEST_F(CMakeProjectTest, UnknownNamesAndFunctionsAreUnresolved) {
  write("CMakeLists.txt",
        "project(p)\nfunction(make)\n  add_executable(infn a.cpp)\nendfunction()\n"
        "add_executable(${FROM_CACHE} b.cpp)\nadd_executable(known b.cpp $<$<CONFIG:Debug>:c.cpp>)\n");
  Project project = Project::load(std::string(root_));
  ASSERT_EQ(project.targets().size(), 3u);
  EXPECT_FALSE(project.targets()[0].resolved);
  EXPECT_EQ(project.targets()[1].name, "${FROM_CACHE}");
  EXPECT_FALSE(project.targets()[1].resolved);
  EXPECT_TRUE(project.targets()[2].resolved);  // a source behind a generator expression does not hide the target
  EXPECT_EQ(project.targets()[2].sources, std::vector<std::string>{path("b.cpp")});
}

}  // namespace
