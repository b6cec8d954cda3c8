#include <gtest/gtest.h>

#include <acc_common/slurm_nodelist.h>

namespace {

using acc::common::first_slurm_host;

TEST(SlurmNodelist, FirstHostOfPlainAndRangedLists) {
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(first_slurm_host("x,y[1-2]"), "x");
  EXPECT_EQ(first_slurm_host("a[1,2],b[3-4]"), "a1");
  EXPECT_EQ(first_slurm_host("gpu[003-005,9],cpu1"), "gpu003");  // zero padding kept
}

// The runtime's copy stopped at the first range and returned "rack2".
TEST(SlurmNodelist, EveryRangeOfANameIsExpanded) {
  EXPECT_EQ(first_slurm_host("rack[2]-n[1-4]"), "rack2-n1");
  EXPECT_EQ(first_slurm_host("rack[2-3]-n[07,9]-gpu,other"), "rack2-n07-gpu");
}

// The launcher's copy let a stray ']' take the depth below zero; every later comma then looked
// bracketed and the whole list came back as one host.
TEST(SlurmNodelist, StrayClosingBracketDoesNotHideLaterCommas) {
  EXPECT_EQ(first_slurm_host("a]b,c"), "a]b");
  EXPECT_EQ(first_slurm_host("n]1,n[2-3]"), "n]1");
}

TEST(SlurmNodelist, UnclosedRangeGivesItsFirstNumber) {
  EXPECT_EQ(first_slurm_host("node[03-05"), "node03");
  EXPECT_EQ(first_slurm_host(""), "");
}

}  // namespace
