#include "fixture_runner.hpp"

#include <exception>

#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"

namespace fusebench::bench {

Workspace& FixtureRunner::workspace_for(const Fixture& f) {
  const std::string name = f.name();
  if (!current_ || current_name_ != name) {
    current_.reset();  // free the previous fixture's buffers before allocating
    current_name_.clear();
    current_ = std::make_unique<Workspace>(backend_, build_plan(f.op, f.variant, f.shard, f.tokens, f.dtype), seed_);
    current_name_ = name;
    current_->run();  // warm-up: cuBLASLt heuristics, lazy module loading
    backend_.synchronize();
  }
  return *current_;
}

void FixtureRunner::run(benchmark::State& state, const Fixture& f) {
  try {
    Workspace& ws = workspace_for(f);
    const Cost cost = cost_of(ws.plan());
    auto timer = backend_.make_timer();
    backend_.take_algorithm_log();
    for (auto _ : state) {
      timer->start();
      ws.run();
      timer->stop();
      state.SetIterationTime(timer->seconds());
    }
    const auto algos = backend_.take_algorithm_log();
    if (!algos.empty()) {
      std::string label;
      for (std::size_t i = 0; i < algos.size() && i < ws.plan().steps.size(); ++i) {
        label += (i ? "; " : "") + algos[i];
      }
      state.SetLabel(label);
    }
    using benchmark::Counter;
    state.counters["model_flops"] = Counter(cost.flops);
    state.counters["model_bytes"] = Counter(cost.bytes);
    state.counters["model_launches"] = Counter(cost.launches);
    state.counters["model_intensity"] = Counter(cost.arithmetic_intensity());
    state.counters["tokens"] = Counter(static_cast<double>(f.tokens));
    state.counters["tp"] = Counter(f.shard.tp);
    state.counters["flops_per_second"] = Counter(cost.flops, Counter::kIsIterationInvariantRate);
    state.counters["bytes_per_second"] = Counter(cost.bytes, Counter::kIsIterationInvariantRate);
  } catch (const std::exception& e) {
    current_.reset();
    current_name_.clear();
    state.SkipWithError(e.what());
  }
}

}  // namespace fusebench::bench
