#pragma once
// --benchmark_filter applied to our fixtures before Google Benchmark runs them, with Google
// Benchmark 1.7.1's semantics, so --list, --verify, the memory check, the progress counter and
// the comparison groups (groups.hpp) see the same fixtures it will run: empty or "all" selects
// everything; a leading '-' selects what does NOT match; the rest is a POSIX extended regular
// expression searched for (not matched whole) in the full run name, Google Benchmark's
// "/iterations:1/manual_time" included.
#include <regex>
#include <string>
#include <vector>

#include "sweep.hpp"

namespace fusebench::bench {

class FixtureFilter {
 public:
  // Throws std::invalid_argument when the expression does not compile (Google Benchmark would
  // run nothing; we refuse it as bad input).
  explicit FixtureFilter(const std::string& spec);
  bool selects(const Fixture& fixture) const;
  bool selects_name(const std::string& run_name) const;
  // Per fixture: whether the filter selects it (what plan_groups takes).
  std::vector<bool> mask(const std::vector<Fixture>& fixtures) const;
  const std::string& spec() const { return spec_; }

 private:
  std::string spec_;
  bool negative_ = false;
  std::regex re_;
};

// The name Google Benchmark gives a fixture's run (what the filter sees).
std::string run_name(const Fixture& fixture);

// The fixtures the filter selects, in order; throws std::invalid_argument when none is.
std::vector<Fixture> select_fixtures(const std::vector<Fixture>& fixtures,
                                     const FixtureFilter& filter);

}  // namespace fusebench::bench
