#pragma once
// Comparison groups: the fixtures that differ only in variant (same op, model, tokens, tp,
// dtype, comm, regime and whatever else the name carries), measured together, interleaved
// (docs/timing.md). A group is the members Google Benchmark's --benchmark_filter selects, so a
// filtered run measures exactly the entries it reports.
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "sweep.hpp"

namespace fusebench::bench {

// The name Google Benchmark gives a fixture's run (what --benchmark_filter is matched against).
std::string run_name(const Fixture& fixture);

// --benchmark_filter as Google Benchmark (1.7 to 1.9) applies it: "" and "all" select every
// run; a leading '-' negates the rest; otherwise the extended regular expression is searched
// for in the run name. Throws std::regex_error on an invalid expression.
bool filter_selects(const std::string& filter, const std::string& run_name);

// Which fixtures `filter` selects; none when the expression is invalid (Google Benchmark then
// runs nothing and says why).
std::vector<bool> select_fixtures(const std::vector<Fixture>& fixtures, const std::string& filter);

struct ComparisonGroup {
  std::string key;                      // Fixture::group_key()
  std::vector<std::size_t> members;     // sweep indices of the selected members, in sweep order
  std::vector<std::size_t> unselected;  // members of the sweep the filter left out
};

struct GroupPlan {
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::vector<ComparisonGroup> groups;
  std::vector<std::size_t> group_of;  // per fixture: its group, none when not selected
};

GroupPlan plan_groups(const std::vector<Fixture>& fixtures, const std::vector<bool>& selected);

}  // namespace fusebench::bench
