#pragma once
// Sweep progress on stderr: "[k/N] <fixture>  elapsed 1m02s, about 3m10s left". On a terminal
// one line, redrawn in place and erased before anything else is printed; otherwise (a pipe, a
// file) one plain line per finished fixture, with no escape codes.
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
};

// Seconds the remaining fixtures should take, from the durations of the finished ones fitted as
// a + b*flops + c*bytes (least squares, every coefficient >= 0: the best fit over the subsets of
// the three terms; the mean duration until four fixtures have finished), so a sweep that grows
// towards large shapes is not extrapolated from its small first fixtures.
double estimate_seconds_left(const std::vector<PlannedFixture>& finished,
                             const std::vector<double>& seconds,
                             const std::vector<PlannedFixture>& remaining);

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
  std::vector<PlannedFixture> finished_;
  std::vector<double> seconds_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace fusebench::bench
