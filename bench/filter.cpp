#include "filter.hpp"

#include <stdexcept>

namespace fusebench::bench {

FixtureFilter::FixtureFilter(const std::string& spec) : spec_(spec) {
  std::string re = spec;
  if (re.empty() || re == "all") re = ".";  // RunSpecifiedBenchmarks
  if (re[0] == '-') {                       // FindBenchmarks
    re.erase(0, 1);
    negative_ = true;
  }
  try {
    re_ = std::regex(re, std::regex_constants::extended);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument("--benchmark_filter=" + spec +
                                " is not a valid extended regular expression: " + e.what());
  }
}

bool FixtureFilter::selects_name(const std::string& full_name) const {
  return std::regex_search(full_name, re_) != negative_;
}

bool FixtureFilter::selects(const Fixture& fixture) const {
  return selects_name(benchmark_name(fixture));
}

std::string benchmark_name(const Fixture& fixture) {
  // Registered with Iterations(1) and UseManualTime() (main.cpp).
  return fixture.name() + "/iterations:1/manual_time";
}

std::vector<Fixture> select_fixtures(const std::vector<Fixture>& fixtures,
                                     const FixtureFilter& filter) {
  std::vector<Fixture> selected;
  for (const auto& f : fixtures) {
    if (filter.selects(f)) selected.push_back(f);
  }
  if (selected.empty()) {
    throw std::invalid_argument("--benchmark_filter=" + filter.spec() + " selects none of the " +
                                std::to_string(fixtures.size()) +
                                " fixtures of this sweep (--list shows them without the filter)");
  }
  return selected;
}

}  // namespace fusebench::bench
