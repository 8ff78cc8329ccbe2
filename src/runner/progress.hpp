#pragma once
// Sweep progress on stderr: "[k/N] <fixture>  elapsed 1m02s, about 3m10s left". On a terminal
// one line, redrawn in place and erased before anything else is printed; otherwise (a pipe, a
// file) one plain line per finished fixture, with no escape codes. The counter counts entries;
// the ETA prices comparison groups: a group is measured in its first member's call and the
// other members return at once (group_runner.hpp), so its time and cost are the group's.
#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

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

// The ETA of a sweep of comparison groups: each group is one observation (the summed cost of
// its planned members, the summed durations of those finished) once any member has finished;
// the groups none of whose members has finished are what is left.
class GroupEta {
 public:
  explicit GroupEta(const std::vector<PlannedFixture>& planned);
  // `fixture` finished after `seconds` (an unplanned one counts as a group of its own, cost 0).
  void finished(const PlannedFixture& fixture, double seconds);
  double seconds_left() const;

 private:
  struct Group {
    PlannedFixture cost;  // summed over the planned members
    double seconds = 0;
    bool started = false;
  };
  std::vector<Group> groups_;  // in plan order
  std::vector<std::string> keys_;
  std::size_t group_index(const PlannedFixture& fixture);
};

class Progress {
 public:
  // `planned`: the fixtures that will run, in order (after --benchmark_filter). `redraw`: stderr
  // is a terminal.
  Progress(std::vector<PlannedFixture> planned, std::ostream& out, bool redraw);
  // A fixture's results were printed: count it and show the line.
  void finished(const std::string& name);
  // Erases the redrawn line (terminal only) so other output starts at column 0.
  void clear();
  // Ends the redrawn line (terminal only).
  void end();
  static bool stderr_is_terminal();

 private:
  std::vector<PlannedFixture> planned_;
  std::ostream& out_;
  bool redraw_;
  bool line_shown_ = false;
  std::size_t finished_ = 0;
  GroupEta eta_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace fusebench::bench
