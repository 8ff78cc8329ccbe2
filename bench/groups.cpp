#include "groups.hpp"

#include <map>
#include <regex>

namespace fusebench::bench {

std::string run_name(const Fixture& f) {
  // Registered with Iterations(1) and UseManualTime() (fixture_runner.hpp).
  return f.name() + "/iterations:1/manual_time";
}

bool filter_selects(const std::string& filter, const std::string& name) {
  std::string spec = filter;
  if (spec.empty() || spec == "all") return true;
  bool negative = false;
  if (spec[0] == '-') {
    negative = true;
    spec.erase(0, 1);
  }
  const std::regex re(spec, std::regex_constants::extended);
  return std::regex_search(name, re) != negative;
}

std::vector<bool> select_fixtures(const std::vector<Fixture>& fixtures, const std::string& filter) {
  std::vector<bool> selected(fixtures.size(), false);
  try {
    for (std::size_t i = 0; i < fixtures.size(); ++i)
      selected[i] = filter_selects(filter, run_name(fixtures[i]));
  } catch (const std::regex_error&) {
    selected.assign(fixtures.size(), false);
  }
  return selected;
}

GroupPlan plan_groups(const std::vector<Fixture>& fixtures, const std::vector<bool>& selected) {
  GroupPlan plan;
  plan.group_of.assign(fixtures.size(), GroupPlan::none);
  std::map<std::string, std::size_t> by_key;
  for (std::size_t i = 0; i < fixtures.size(); ++i) {
    const std::string key = fixtures[i].group_key();
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      it = by_key.emplace(key, plan.groups.size()).first;
      plan.groups.push_back({key, {}, {}});
    }
    ComparisonGroup& g = plan.groups[it->second];
    if (i < selected.size() && selected[i]) {
      g.members.push_back(i);
      plan.group_of[i] = it->second;
    } else {
      g.unselected.push_back(i);
    }
  }
  return plan;
}

}  // namespace fusebench::bench
