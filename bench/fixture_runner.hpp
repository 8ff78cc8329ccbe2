#pragma once
// Runs one fixture as a Google Benchmark body: materialises its plan (cached across the calls
// Google Benchmark makes for the same fixture), times it, runs the counter passes, and sets the
// counters. Each of those steps lives in its own file.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/counters.hpp"
#include "fusebench/workspace.hpp"
#include "sweep.hpp"
#include "timing_loop.hpp"
#include "tp_fixture.hpp"

namespace fusebench::bench {

// Fields merged into each report entry, keyed by fixture name: set up by main, completed by the
// runner (algorithms, kernel names, unavailable counters), read by the ReportWriter.
using EntryFields = std::map<std::string, nlohmann::json>;

class FixtureRunner {
 public:
  FixtureRunner(Backend& backend, std::uint64_t seed, EntryFields& fields)
      : backend_(backend), seed_(seed), fields_(fields) {}
  void add_collector(std::unique_ptr<CounterCollector> collector) {
    collectors_.push_back(std::move(collector));
  }
  // Never throws: a failing fixture is reported with SkipWithError and the sweep goes on.
  void run(benchmark::State& state, const Fixture& fixture);
  // Regimes, stopping rule, ceilings (timing_loop.hpp, docs/timing.md).
  void set_timing(TimingSettings settings) { timing_ = std::move(settings); }
  void set_comm(CommSettings settings) { comm_ = std::move(settings); }
  void release() {
    tp_.reset();
    rotation_.reset();
    current_.reset();
  }

 private:
  Workspace& workspace_for(const Fixture& fixture);
  // timing:graph entries: what one replay of the captured graph executed (graph_launches).
  void count_graph_replay(const Fixture& fixture, RegionCounters& measured);

  Backend& backend_;
  std::uint64_t seed_;
  EntryFields& fields_;
  std::vector<std::unique_ptr<CounterCollector>> collectors_;
  std::string current_name_;
  std::unique_ptr<Workspace> current_;
  CommSettings comm_;          // TP fixtures (tp_fixture.hpp)
  std::unique_ptr<TpRun> tp_;  // the other ranks of a TP fixture; goes before current_
  TimingSettings timing_;
  RotationState rotation_;    // cache-rotation copies of current_'s buffers
  std::string counted_name_;  // fixture whose counter passes ran; their result is counted_
  RegionCounters counted_;
};

}  // namespace fusebench::bench
