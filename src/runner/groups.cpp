#include "groups.hpp"

#include <map>

namespace fusebench::bench {

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
