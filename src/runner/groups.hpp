#pragma once
// Comparison groups: the fixtures that differ only in variant (same op, model, tokens, tp,
// dtype, comm, regime and whatever else the name carries), measured together, interleaved
// (docs/timing.md). A group is the members Google Benchmark's --benchmark_filter selects
// (FixtureFilter::mask, filter.hpp), so a filtered run measures exactly the entries it reports.
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "sweep.hpp"

namespace fusebench::bench {

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
