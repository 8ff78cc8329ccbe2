#include "fixture_runner.hpp"

#include <algorithm>
#include <exception>

#include "fusebench/cost_model.hpp"
#include "fusebench/counter_passes.hpp"
#include "fusebench/nvtx.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"

namespace fusebench::bench {
namespace {

void set_model_counters(benchmark::State& state, const Fixture& f, const Cost& cost) {
  using benchmark::Counter;
  state.counters["model_flops"] = Counter(cost.flops);
  state.counters["model_bytes"] = Counter(cost.bytes);
  state.counters["model_launches"] = Counter(cost.launches);
  state.counters["model_intensity"] = Counter(cost.arithmetic_intensity());
  state.counters["tokens"] = Counter(static_cast<double>(f.tokens));
  state.counters["tp"] = Counter(f.shard.tp);
  state.counters["flops_per_second"] = Counter(cost.flops, Counter::kIsIterationInvariantRate);
  state.counters["bytes_per_second"] = Counter(cost.bytes, Counter::kIsIterationInvariantRate);
}

}  // namespace

Workspace& FixtureRunner::workspace_for(const Fixture& f) {
  const std::string name = f.data_name();  // the timing regimes of a fixture share its buffers
  if (!current_ || current_name_ != name) {
    rotation_.reset();
    tp_.reset();       // its ranks use current_
    current_.reset();  // free the previous fixture's buffers before allocating
    current_name_.clear();
    current_ = std::make_unique<Workspace>(
        backend_, build_plan(f.op, f.variant, f.shard, f.tokens, f.dtype), seed_);
    if (is_tp_op(f.op))
      tp_ = std::make_unique<TpRun>(*current_, f, seed_, comm_);  // other ranks, comm
    current_name_ = name;
    tp_ ? tp_->region() : current_->run();  // warm-up: cuBLASLt heuristics, lazy module loading
    backend_.synchronize();
  }
  return *current_;
}

void FixtureRunner::run(benchmark::State& state, const Fixture& f) {
  try {
    NvtxRange fixture_range(f.name());
    Workspace& ws = workspace_for(f);
    const auto region = [&ws, this] { tp_ ? tp_->region() : ws.run(); };  // TP: every rank
    backend_.take_algorithm_log();
    {
      NvtxRange timed_range(f.name() + "/timed");
      time_region(state, f, ws, region, rotation_, timing_, fields_[f.name()]);
    }
    auto& fields = fields_[f.name()];
    if (const auto algos = backend_.take_algorithm_log(); !algos.empty()) {
      // One entry per GEMM step of the plan (a grouped/batched step is one), in step order.
      const auto gemm_steps = static_cast<std::size_t>(
          std::count_if(ws.plan().steps.begin(), ws.plan().steps.end(), [](const Step& s) {
            return std::holds_alternative<GemmStep>(s) ||
                   std::holds_alternative<GroupedGemmStep>(s);
          }));
      fields["gemm_algorithms"] = std::vector<std::string>(
          algos.begin(), algos.begin() + std::min(algos.size(), gemm_steps));
    }
    // The counter passes run once per fixture, after its first timed pass: the timing regimes
    // and repetitions of a fixture run the same region, whose counts do not depend on how it was
    // timed, so they share one count.
    if (counted_name_ != f.data_name()) {
      counted_ = RegionCounters{};
      counted_name_.clear();
      for (const auto& collector : collectors_)
        counted_.merge(collector->collect(f.name(), region));
      counted_name_ = f.data_name();
    }
    const Cost cost = cost_of(ws.plan());
    RegionCounters measured = counted_;
    if (f.timing == "graph") count_graph_replay(f, measured);
    add_model_ratios(measured, cost.launches, cost.bytes);
    for (const auto& [counter, value] : measured.values)
      state.counters[counter] = benchmark::Counter(value);
    if (!measured.unavailable.empty()) fields["counters_unavailable"] = measured.unavailable;
    if (!measured.kernel_names.empty()) fields["kernel_names"] = measured.kernel_names;
    if (tp_)
      tp_->report(state, fields, timing_.device,
                  timing_.block_timeout_s);  // compute/comm split, bus bandwidth
    set_model_counters(state, f, cost);
  } catch (const std::exception& e) {
    rotation_.reset();
    tp_.reset();
    current_.reset();
    current_name_.clear();
    state.SkipWithError(e.what());
  }
}

// The launch-count pass counts eager runs of the region; a graph entry times a replay of its
// capture instead, so the replay is counted too (graph nodes are kernel records with a graph
// id): a capture that executes something else than the eager region shows as a difference.
void FixtureRunner::count_graph_replay(const Fixture& f, RegionCounters& measured) {
  if (rotation_.graphs.empty()) return;
  for (const auto& collector : collectors_) {
    if (collector->name() != "launch-count") continue;
    const RegionCounters replay =
        collector->collect(f.name() + "/graph", [this] { rotation_.graphs.front()->launch(); });
    if (const auto it = replay.values.find("launches"); it != replay.values.end()) {
      measured.values["graph_launches"] = it->second;
    } else if (const auto why = replay.unavailable.find("launches");
               why != replay.unavailable.end()) {
      measured.unavailable["graph_launches"] = why->second;
    }
  }
}

}  // namespace fusebench::bench
