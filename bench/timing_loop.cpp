#include "fixture_runner.hpp"

namespace fusebench::bench {

void time_region(benchmark::State& state, Backend& backend, const std::function<void()>& region) {
  auto timer = backend.make_timer();
  for (auto _ : state) {
    timer->start();
    region();
    timer->stop();
    state.SetIterationTime(timer->seconds());
  }
}

}  // namespace fusebench::bench
