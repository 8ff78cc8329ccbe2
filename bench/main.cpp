// fusebench: registers the sweep with Google Benchmark, runs it, writes the JSON report.
#include <benchmark/benchmark.h>

#include <cstring>
#include <iostream>
#include <random>

#include "comm/local_gpu.hpp"
#include "comm/tp_run.hpp"
#include "fixture_runner.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/counter_passes.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/mpi_comm.hpp"
#include "fusebench/nccl_comm.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/report.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/verify.hpp"
#include "group_runner.hpp"
#include "groups.hpp"
#include "options.hpp"
#include "report_writer.hpp"
#include "sweep.hpp"
#include "timing_setup.hpp"

using namespace fusebench;

namespace {

// Verifies every op variant on a decode-sized and an odd-sized token count; the float64
// reference is skipped where it would take too long on the host.
nlohmann::json run_verification(Backend& backend, const bench::Sweep& sweep, std::uint64_t seed,
                                bool& ok) {
  nlohmann::json results = nlohmann::json::array();
  ok = true;
  for (const auto& model : sweep.models) {
    for (int tp : sweep.tp) {
      const ShardShape s = shard(model, tp);
      for (const auto& op : sweep.ops) {
        if (is_collective_op(op) && tp == 1) continue;  // not in the sweep either
        for (DType dtype : sweep.dtypes) {
          // TP pipelines at tp > 1: every rank on a CPU thread with the in-process communicator
          // (a GPU run may have fewer GPUs than ranks); the GEMMs themselves are verified by
          // qkv/gate_up and by the tp = 1 pipelines on this backend.
          const bool tp_on_cpu = is_tp_op(op) && tp > 1;
          if (tp_on_cpu && !make_cpu_backend()->unsupported_reason(dtype).empty()) continue;
          for (std::int64_t tokens : {std::int64_t{1}, std::int64_t{37}}) {
            const double macs = static_cast<double>(tokens) * static_cast<double>(s.hidden) *
                                static_cast<double>(s.qkv_size() + 2 * s.intermediate);
            const bool with_reference = macs <= 2e9;
            const auto verified =
                tp_on_cpu ? verify_tp_op_inprocess(op, s, tokens, dtype, seed, with_reference)
                          : verify_op(backend, op, s, tokens, dtype, seed, with_reference);
            for (const auto& r : verified) {
              std::cerr << "verify " << model.name << " tp=" << tp << " tokens=" << tokens << " "
                        << to_string(dtype) << ": " << r.summary() << "\n";
              ok = ok && r.ok();
              nlohmann::json j = {{"op", r.op},          {"variant", r.variant},
                                  {"model", model.name}, {"tp", tp},
                                  {"tokens", tokens},    {"dtype", to_string(dtype)},
                                  {"ok", r.ok()},        {"float64_reference", with_reference}};
              for (const auto& c : r.comparisons) {
                j["comparisons"].push_back({{"output", c.output},
                                            {"against", c.against},
                                            {"max_abs_error", c.max_abs_error},
                                            {"max_rel_error", c.max_rel_error},
                                            {"mismatches", c.mismatches},
                                            {"elements", c.elements}});
              }
              results.push_back(j);
            }
          }
        }
      }
    }
  }
  return results;
}

}  // namespace

int main(int argc, char** argv) {
  // Multi-process TP runs (mpirun, srun): one GPU per local rank unless the launcher chose, set
  // before anything touches CUDA; MPI bootstraps NCCL and carries rank 0's commands (docs/tp.md).
  pin_local_gpu();
  std::unique_ptr<MpiSession> mpi;
  if (launched_by_mpi() && mpi_built()) mpi = std::make_unique<MpiSession>(&argc, &argv);
  // Our help first, then Google Benchmark's (its Initialize would print only its own).
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      bench::Options ignored;
      char help[] = "--help";
      char* help_argv[] = {argv[0], help, nullptr};
      bench::parse_options(2, help_argv, ignored);
      std::cout << "\nGoogle Benchmark's flags (accepted too):\n";
      benchmark::PrintDefaultHelp();
      return 0;
    }
  }
  benchmark::Initialize(&argc, argv);
  bench::Options options;
  if (int code = bench::parse_options(argc, argv, options); code >= 0) return code;

  try {
    BackendChoice choice = make_backend(parse_backend_kind(options.backend));
    Backend& backend = *choice.backend;
    std::cerr << "fusebench: backend " << backend.name() << " (" << choice.reason << ")\n";
    CommSettings comm;
    comm.requested = options.comm;
    comm.link = options.link_profile == "measured" ? measure_link_profile(backend, comm)
                                                   : find_link_profile(options.link_profile);
    comm.timeout_s = default_comm_timeout();
    std::unique_ptr<Communicator> world;
    if (mpi && mpi->size() > 1) {
      world = backend.name() == "cpu" ? make_mpi_communicator(comm.timeout_s)
                                      : make_nccl_mpi_communicator(backend, comm.timeout_s);
      comm.world = world.get();
    }
    const bench::Sweep sweep = bench::build_sweep(options, backend, &comm);
    if (options.list) {
      for (const auto& f : sweep.fixtures) std::cout << f.name() << "\n";
      return 0;
    }
    std::uint64_t seed = options.seed != 0 ? options.seed : std::random_device{}() | 1ull;
    if (comm.world != nullptr) {
      // Every rank needs rank 0's seed (their shards are slices of the same tensors); the
      // other ranks then follow rank 0's fixtures and write nothing.
      std::vector<char> bytes(sizeof(seed));
      std::memcpy(bytes.data(), &seed, sizeof(seed));
      mpi_broadcast(bytes);
      std::memcpy(&seed, bytes.data(), sizeof(seed));
      if (comm.world->rank() != 0) {
        std::vector<TpMember> members;  // the sweep by index, as the leader names fixtures
        for (std::size_t i = 0; i < sweep.fixtures.size(); ++i)
          members.push_back(bench::tp_member(sweep.fixtures[i], i));
        TpRun::follow(members, backend, seed, comm);
        return 0;
      }
    }

    nlohmann::json context = collect_context(backend.context(), argc, argv);
    context["backend_reason"] = choice.reason;
    context["seed"] = seed;
    // Regimes, stopping rule, measured ceilings (docs/timing.md); sets context["timing"].
    bench::TimingSetup timing = bench::setup_timing(options, backend, sweep, context);
    context["counter_definitions"] = {
        {"model_flops", "matmul FLOPs of the plan per iteration (2*M*N*K per GEMM)"},
        {"model_bytes",
         "minimal bytes per iteration: each step reads its inputs and writes its outputs once"},
        {"model_launches", "kernels (GPU) or library calls (CPU) the plan issues per iteration"},
        {"model_intensity", "model_flops / model_bytes (FLOP/B)"},
        {"flops_per_second", "model_flops / measured time"},
        {"bytes_per_second", "model_bytes / measured time"}};

    if (options.verify) {
      bool ok = false;
      context["verification"] = run_verification(backend, sweep, seed, ok);
      if (!ok) {
        std::cerr << "fusebench: verification FAILED; not benchmarking wrong results\n";
        if (!options.report.empty()) {
          write_file_atomically(
              options.report,
              sanitize({{"context", context}, {"benchmarks", nlohmann::json::array()}}).dump(2));
        }
        return 1;
      }
      std::cerr << "fusebench: verification passed\n";
    }

    bench::EntryFields fields;
    // Comparison groups: the variants of one op at one shape and regime, measured interleaved;
    // a group is what --benchmark_filter selects of it (groups.hpp, docs/timing.md).
    bench::GroupRunner groups(
        backend, seed, sweep.fixtures,
        bench::plan_groups(sweep.fixtures,
                           bench::select_fixtures(sweep.fixtures, benchmark::GetBenchmarkFilter())),
        timing.settings, comm);
    bench::FixtureRunner runner(groups, fields);
    context["tp"] = tp_context(comm, mpi ? mpi->size() : 1);
    const nlohmann::json tp_definitions = tp_counter_definitions();
    for (const auto& [counter, definition] : tp_definitions.items())
      context["counter_definitions"][counter] = definition;
    {
      // Launch-count and DRAM passes (docs/counters.md), probed once here so the context says
      // which counters this run can read and why not.
      CounterPassOptions pass_options;
      pass_options.launch_counts = options.launch_counts == "on";
      pass_options.dram_counters = options.dram_counters == "on";
      pass_options.backend_reason = choice.reason;
      CounterPasses passes = make_counter_passes(backend, pass_options);
      context["counters"] = passes.status;
      context["counter_passes"] = passes.setup;
      const nlohmann::json definitions = measured_counter_definitions();
      for (const auto& [counter, definition] : definitions.items()) {
        context["counter_definitions"][counter] = definition;
      }
      for (auto& collector : passes.collectors) groups.add_collector(std::move(collector));
    }
    for (std::size_t i = 0; i < sweep.fixtures.size(); ++i) {
      const bench::Fixture& f = sweep.fixtures[i];
      const std::string name = f.name();
      fields[name] = {{"op", f.op},
                      {"variant", f.variant},
                      {"model", f.model.name},
                      {"tokens", f.tokens},
                      {"tp", f.shard.tp},
                      {"dtype", to_string(f.dtype)},
                      {"backend", backend.name()}};
      if (!f.comm.empty()) fields[name]["comm"] = f.comm;
      auto* b = benchmark::RegisterBenchmark(
          name.c_str(), [&runner, f, i](benchmark::State& st) { runner.run(st, f, i); });
      // One iteration = one complete measurement under the stopping rule (fixture_runner.hpp).
      b->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
    }
    bench::ReportWriter writer(options.report, context, sweep.fixtures.size(), fields);
    benchmark::RunSpecifiedBenchmarks(&writer);
    groups.release();
    TpRun::release_followers(comm);
    std::cerr << "fusebench: " << groups.tally_text() << "\n";
    benchmark::Shutdown();
    if (!options.report.empty()) {
      if (!writer.flush()) return 2;
      std::cerr << "fusebench: report written to " << options.report << "\n";
    }
    if (writer.failures() > 0) {
      std::cerr << "fusebench: " << writer.failures()
                << " fixture(s) failed; see error_message in the report\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fusebench: error: " << e.what() << "\n";
    if (mpi && mpi->size() > 1) std::_Exit(2);  // the other ranks may wait on this one: end the job
    return 2;
  }
}
