#pragma once
// The Google Benchmark glue: one registered benchmark per fixture, each run with Iterations(1)
// (one iteration = one complete measurement, docs/timing.md). Its body takes the fixture's
// result from the GroupRunner (which measured the fixture's whole comparison group, interleaved,
// when the group's first member was called) and hands it to Google Benchmark:
// SetIterationTime(median per run), counters, and the report fields.
#include <benchmark/benchmark.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "runner/group_runner.hpp"
#include "runner/report_writer.hpp"
#include "runner/sweep.hpp"

namespace fusebench::bench {

class FixtureRunner {
 public:
  FixtureRunner(GroupRunner& groups, EntryFields& fields) : groups_(groups), fields_(fields) {}
  // Never throws: a failing fixture is reported with SkipWithError and the sweep goes on.
  void run(benchmark::State& state, const Fixture& fixture, std::size_t index);

 private:
  GroupRunner& groups_;
  EntryFields& fields_;  // main's fields; each call (repetition) records its result's
};

}  // namespace fusebench::bench
