#pragma once
// Runs one fixture as a Google Benchmark body: materialises its plan (cached across the calls
// Google Benchmark makes for the same fixture), times it, and sets the counters.
#include <memory>

#include <benchmark/benchmark.h>

#include "fusebench/backend.hpp"
#include "fusebench/workspace.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

class FixtureRunner {
 public:
  FixtureRunner(Backend& backend, std::uint64_t seed) : backend_(backend), seed_(seed) {}
  // Never throws: a failing fixture is reported with SkipWithError and the sweep goes on.
  void run(benchmark::State& state, const Fixture& fixture);
  void release() { current_.reset(); }

 private:
  Workspace& workspace_for(const Fixture& fixture);

  Backend& backend_;
  std::uint64_t seed_;
  std::string current_name_;
  std::unique_ptr<Workspace> current_;
};

}  // namespace fusebench::bench
