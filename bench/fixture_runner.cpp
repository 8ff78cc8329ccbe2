#include "fixture_runner.hpp"

#include <exception>

#include "fusebench/nvtx.hpp"

namespace fusebench::bench {

void FixtureRunner::run(benchmark::State& state, const Fixture& f, std::size_t index) {
  const std::string name = f.name();
  NvtxRange fixture_range(name);
  EntryResult r;
  try {
    r = groups_.next_result(index);
  } catch (const std::exception& e) {
    r = EntryResult{e.what()};
  }
  // This call's fields on main's, kept as this repetition's (the writer gives each its own).
  const nlohmann::json& fields = fields_.record(name, r.fields);
  if (!r.error.empty()) {
    state.SkipWithError(r.error.c_str());
    return;
  }
  for (auto _ : state) state.SetIterationTime(r.seconds);
  if (fields.value("emulated", false)) state.SetLabel("emulated");  // not the hardware's time
  using benchmark::Counter;
  for (const auto& [counter, value] : r.counters) state.counters[counter] = Counter(value);
  // Rates divide by the iteration time, the median per run.
  if (auto it = r.counters.find("model_flops"); it != r.counters.end())
    state.counters["flops_per_second"] = Counter(it->second, Counter::kIsIterationInvariantRate);
  if (auto it = r.counters.find("model_bytes"); it != r.counters.end())
    state.counters["bytes_per_second"] = Counter(it->second, Counter::kIsIterationInvariantRate);
}

}  // namespace fusebench::bench
