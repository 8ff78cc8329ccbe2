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

bool FixtureFilter::selects_name(const std::string& name) const {
  return std::regex_search(name, re_) != negative_;
}

bool FixtureFilter::selects(const Fixture& fixture) const {
  return selects_name(run_name(fixture));
}

std::vector<bool> FixtureFilter::mask(const std::vector<Fixture>& fixtures) const {
  std::vector<bool> selected(fixtures.size(), false);
  for (std::size_t i = 0; i < fixtures.size(); ++i) selected[i] = selects(fixtures[i]);
  return selected;
}

std::string run_name(const Fixture& fixture) {
  // Registered with Iterations(1) and UseManualTime() (main.cpp, fixture_runner.hpp).
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
