#pragma once
// Sweep progress on stderr. Two kinds of line: while a group is measured, after every block
// (group_runner.hpp tells it, run_observer.hpp)
//   measuring <group>: block 3/5 (12/60 blocks, 2/12 groups done)  elapsed 0m14s, about 0m47s left
// and once a fixture's result row is printed
//   [k/N] <fixture>  elapsed 1m02s, about 3m10s left
// On a terminal one line, redrawn in place and erased before anything else is printed; otherwise
// (a pipe, a file, a launcher's pseudo-terminal) plain lines with no escape codes, each written
// whole: every row line, and a block line at most every few seconds. The estimate prices what is
// left from the measured rate (SweepEta), never from a guess made before anything was measured.
#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "run_observer.hpp"

namespace fusebench::bench {

// What a fixture is expected to cost, from the cost model: the ETA weighs fixtures by it.
struct PlannedFixture {
  std::string name;
  double flops = 0;
  double bytes = 0;
  std::string group;  // its comparison group (Fixture::group_key()); empty: a group of its own
};

// Seconds the remaining fixtures should take, from the durations of the finished ones fitted as
// a + b*flops + c*bytes (least squares, every coefficient >= 0: the best fit over the subsets of
// the three terms; the mean duration until four fixtures have finished), so a sweep that grows
// towards large shapes is not extrapolated from its small first fixtures.
double estimate_seconds_left(const std::vector<PlannedFixture>& finished,
                             const std::vector<double>& seconds,
                             const std::vector<PlannedFixture>& remaining);

// How the group runner measures each group: blocks asked per group (group_runner.hpp, blocks())
// and the timing policy's per-member time bounds (StoppingRule min_time_s, max_time_s).
struct BlockPolicy {
  std::size_t blocks = 1;
  double min_time_s = 0;
  double max_time_s = 0;
};

// Seconds a sweep of comparison groups has left, from the blocks measured so far:
//   - a group with measured blocks: its blocks still to come (its measurement's plan) at the
//     mean wall time of its blocks so far (its own rate);
//   - a group not started: the fit of estimate_seconds_left() over the started groups' whole
//     times (measured + still to come, by the groups' summed cost; a group whose rounds are
//     slow gets fewer, longer blocks, so its whole time is what carries over), held between
//     the timing policy's bounds on a group (min_time_s x members plus one block's time outside
//     sampling; max_time_s x members plus that for every block asked, or the longest started
//     group when one overran its budget waiting for its minimum rounds).
// A block's wall time is what the caller measured since the previous block ended, so nothing
// between blocks (preparing buffers and ranks, warm-up, counter passes, reporting) goes
// unpriced; the time outside sampling is that minus what the engine sampled.
class SweepEta {
 public:
  SweepEta(const std::vector<PlannedFixture>& planned, BlockPolicy policy);
  void block_done(const BlockDone& event, double seconds);
  // nullopt until a block has been measured: nothing is known of this machine's rate yet.
  std::optional<double> seconds_left() const;
  std::size_t blocks_done() const { return blocks_done_; }
  std::size_t blocks_total() const;  // done + left (the plans of started groups included)
  std::size_t groups_total() const { return groups_.size(); }
  // The group's next block (1-based) and its blocks (as planned so far).
  std::pair<std::size_t, std::size_t> next_block(const std::string& key) const;

 private:
  struct Group {
    PlannedFixture cost;  // summed over the planned members
    std::size_t members = 0;
    std::size_t done = 0, left = 0;  // blocks
    double seconds = 0;              // wall time of its blocks
  };
  std::size_t group_index(const std::string& key);
  double projected_s(const Group& g) const;  // a started group's whole time
  double predicted_group_s(const Group& g) const;
  BlockPolicy policy_;
  std::vector<Group> groups_;  // in plan order
  std::vector<std::string> keys_;
  std::size_t blocks_done_ = 0;
  double outside_sampling_s_ = 0;  // summed over the blocks that sampled
  std::size_t sampled_blocks_ = 0;
};

class Progress : public RunObserver {
 public:
  // `planned`: the fixtures that will run, in order (after --benchmark_filter). `redraw`: stderr
  // is a terminal. `policy`: how groups are measured, for the estimate.
  Progress(std::vector<PlannedFixture> planned, std::ostream& out, bool redraw,
           BlockPolicy policy = {});
  // A fixture's results were printed: count it and show the line.
  void finished(const std::string& name);
  void block_done(const BlockDone& event) override;
  void group_done(std::size_t group, const std::string& key) override;
  void round_started(std::size_t group, const std::string& key, std::size_t round) override;
  // Erases the redrawn line (terminal only) so other output starts at column 0.
  void clear();
  // Ends the redrawn line (terminal only).
  void end();
  // Off a terminal, a block line is printed when this many seconds have passed since the last
  // line (the first block's line always is).
  void set_plain_interval(double seconds) { plain_interval_s_ = seconds; }
  // stderr is a terminal of this user's (not under a launcher, whose pseudo-terminal may be
  // redirected to a file) and TERM is not dumb.
  static bool stderr_is_terminal();

 private:
  void show(const std::string& line, bool always);
  std::string timing_text(std::chrono::steady_clock::time_point now) const;
  std::vector<PlannedFixture> planned_;
  std::ostream& out_;
  bool redraw_;
  bool line_shown_ = false;
  std::size_t finished_ = 0;
  std::size_t groups_done_ = 0;
  SweepEta eta_;
  double plain_interval_s_ = 5;
  std::chrono::steady_clock::time_point start_, last_block_, last_line_;
  bool any_line_ = false;
};

}  // namespace fusebench::bench
