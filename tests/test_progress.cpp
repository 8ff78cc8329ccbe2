// Live progress (issue 23): the estimate of the time left from the blocks measured so far, on
// synthetic times, and the lines the observer prints while a block window is measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runner/interrupt.hpp"
#include "runner/progress.hpp"

namespace fusebench::bench {
namespace {

BlockDone block(const std::string& key, std::size_t b, std::size_t blocks, std::size_t members,
                double sampled = 0) {
  BlockDone e;
  e.group_key = key;
  e.block = b;
  e.blocks = blocks;
  e.members = members;
  e.sampled_s = sampled;
  return e;
}

std::vector<PlannedFixture> groups_of(const std::vector<std::pair<std::string, double>>& groups,
                                      int members) {
  std::vector<PlannedFixture> planned;
  for (const auto& [key, flops] : groups) {
    for (int m = 0; m < members; ++m)
      planned.push_back({key + "/v" + std::string(1, static_cast<char>('0' + m)), flops, 0, key});
  }
  return planned;
}

TEST(SweepEta, SaysNothingBeforeTheFirstBlock) {
  SweepEta eta(groups_of({{"a", 1}, {"b", 1}}, 2), {3, 0, 0});
  EXPECT_FALSE(eta.seconds_left().has_value());
  EXPECT_EQ(eta.blocks_total(), 6u);
  eta.block_done(block("a", 0, 3, 2), 2.0);
  ASSERT_TRUE(eta.seconds_left().has_value());
  // a: 2 blocks left at its own 2 s; b (not started): a's whole time, 3 x 2 s.
  EXPECT_NEAR(*eta.seconds_left(), 4.0 + 6.0, 1e-9);
  EXPECT_EQ(eta.blocks_done(), 1u);
}

TEST(SweepEta, AMeasurementsPlanReplacesTheBlocksAsked) {
  SweepEta eta(groups_of({{"a", 1}, {"b", 1}}, 2), {5, 0, 0});
  EXPECT_EQ(eta.blocks_total(), 10u);
  // a's budget affords one block: it is done, and its 4 s is what a group costs.
  eta.block_done(block("a", 0, 1, 2), 4.0);
  EXPECT_EQ(eta.blocks_total(), 6u);
  EXPECT_NEAR(*eta.seconds_left(), 4.0, 1e-9);
  EXPECT_EQ(eta.next_block("b"), (std::pair<std::size_t, std::size_t>{1, 5}));
  eta.block_done(block("b", 0, 5, 2), 1.0);
  EXPECT_EQ(eta.next_block("b"), (std::pair<std::size_t, std::size_t>{2, 5}));
  EXPECT_NEAR(*eta.seconds_left(), 4.0, 1e-9);  // b's 4 blocks left at its 1 s
}

TEST(SweepEta, UnstartedGroupsAreHeldWithinTheTimingPolicysBounds) {
  // Whole times 1..4 s growing with the cost: the fit would give 100 s to a group of cost 100,
  // but the policy caps a group at max_time x members (2 s) plus what blocks cost outside
  // sampling, or the longest started group (4 s) when that is more.
  std::vector<std::pair<std::string, double>> groups = {{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}};
  groups.push_back({"big", 100});
  SweepEta capped(groups_of(groups, 1), {1, 0, 2.0});
  for (std::size_t i = 0; i < 4; ++i)
    capped.block_done(block(groups[i].first, 0, 1, 1, 0), 1.0 + static_cast<double>(i));
  EXPECT_NEAR(*capped.seconds_left(), 4.0, 1e-9);
  // A floor too: a group samples at least min_time x members (here 2 x 1 s), plus the time a
  // block has spent outside sampling (0.5 s: 0.6 s wall, 0.1 s sampled).
  SweepEta floored(groups_of({{"a", 1}, {"b", 1}}, 2), {1, 1.0, 5.0});
  floored.block_done(block("a", 0, 1, 2, 0.1), 0.6);
  EXPECT_NEAR(*floored.seconds_left(), 2.0 + 0.5, 1e-9);
}

// A sweep like the CPU tp_mlp one (12 groups of 4 variants, 5 blocks asked, one window): the
// small groups take 5 blocks of about 1 s, the two largest one block of 7 s (their budget
// affords one). Blocks come window-fashion: block 0 of every group, then block 1, ...
TEST(SweepEta, WithinTwiceTheTruthFromTheFirstBlockOn) {
  std::vector<std::pair<std::string, double>> groups;
  for (int t = 0; t < 12; ++t)
    groups.push_back({std::string(1, static_cast<char>('a' + t)), 1e6 * (1 << t)});
  SweepEta eta(groups_of(groups, 4), {5, 0.02, 0.5});
  struct Event {
    std::string key;
    std::size_t b, blocks;
    double seconds, sampled;
  };
  std::vector<Event> events;
  for (std::size_t b = 0; b < 5; ++b) {
    for (int t = 0; t < 12; ++t) {
      const bool big = t >= 10;
      if (big && b > 0) continue;
      events.push_back(
          {groups[t].first, b, big ? 1u : 5u, big ? 7.0 : 0.8 + 0.02 * t, big ? 2.0 : 0.4});
    }
  }
  double truth = 0;
  for (const auto& e : events) truth += e.seconds;
  double elapsed = 0;
  for (const auto& e : events) {
    eta.block_done(block(e.key, e.b, e.blocks, 4, e.sampled), e.seconds);
    elapsed += e.seconds;
    const double total = elapsed + *eta.seconds_left();
    EXPECT_GE(total, truth / 2) << "after " << elapsed << " s";
    EXPECT_LE(total, truth * 2) << "after " << elapsed << " s";
  }
  EXPECT_NEAR(*eta.seconds_left(), 0, 1e-9);
  EXPECT_EQ(eta.blocks_done(), eta.blocks_total());
}

TEST(ProgressLines, EveryBlockMovesTheLineAndPlainLinesAreThinned) {
  std::ostringstream out;
  Progress p(groups_of({{"a", 1}, {"b", 1}}, 2), out, false, {2, 0, 1});
  p.set_plain_interval(0);
  p.block_done(block("a", 0, 2, 2));
  p.round_started(1, "b", 0);
  p.block_done(block("b", 0, 2, 2));
  p.group_done(0, "a");
  const std::string text = out.str();
  EXPECT_EQ(text.rfind("measuring a: block 1/2 (1/4 blocks, 0/2 groups done)  elapsed ", 0), 0u)
      << text;
  EXPECT_NE(text.find("\nmeasuring b: block 1/2, round 1 (1/4 blocks, 0/2 groups done)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nmeasuring b: block 1/2 (2/4 blocks, 0/2 groups done)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(" left\n"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  // Off a terminal, a block line only once the interval has passed (the first always shows).
  std::ostringstream thin;
  Progress q(groups_of({{"a", 1}}, 2), thin, false, {3, 0, 1});
  q.set_plain_interval(3600);
  q.block_done(block("a", 0, 3, 2));
  q.block_done(block("a", 1, 3, 2));
  q.round_started(0, "a", 4);
  const std::string thinned = thin.str();
  EXPECT_EQ(std::count(thinned.begin(), thinned.end(), '\n'), 1) << thinned;
  q.finished("a/v0");  // a row's line always shows
  EXPECT_NE(thin.str().find("\n[1/2] a/v0  elapsed"), std::string::npos) << thin.str();
}

TEST(ProgressLines, ThereIsNoEstimateBeforeABlockIsMeasured) {
  std::ostringstream out;
  Progress p(groups_of({{"a", 1}, {"b", 1}}, 1), out, false, {1, 0, 1});
  p.set_plain_interval(0);
  p.round_started(0, "a", 0);
  EXPECT_NE(out.str().find("estimating the time left"), std::string::npos) << out.str();
}

TEST(Interrupt, TheFirstSignalIsRecordedAndNamed) {
  install_interrupt_handlers();
  set_interrupt_signal_for_test(0);
  EXPECT_EQ(interrupt_signal(), 0);
  interrupt_self(SIGTERM);  // handled by the watcher: recorded, not fatal (a second would be)
  EXPECT_EQ(interrupt_signal(), SIGTERM);
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  set_interrupt_signal_for_test(0);
}

// The signals are blocked in the thread that installed the handlers and in the threads it starts
// (oneDNN's JIT kernels must never take one: interrupt.cpp), taken by the watcher thread.
TEST(Interrupt, SignalsAreBlockedInTheRunsThreads) {
  install_interrupt_handlers();
  const auto blocked = [] {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    return sigismember(&now, SIGINT) == 1 && sigismember(&now, SIGTERM) == 1;
  };
  EXPECT_TRUE(blocked());
  bool in_thread = false;
  std::thread([&] { in_thread = blocked(); }).join();
  EXPECT_TRUE(in_thread);
  set_interrupt_signal_for_test(0);
  interrupt_self(SIGINT);
  EXPECT_EQ(interrupt_signal(), SIGINT);
  set_interrupt_signal_for_test(0);
}

}  // namespace
}  // namespace fusebench::bench
