// fusebench: registers the sweep with Google Benchmark, runs it, writes the JSON report.
#include <benchmark/benchmark.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>

#include "cli/gbench_flags.hpp"
#include "comm/local_gpu.hpp"
#include "comm/tp_run.hpp"
#include "fixture_runner.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/counter_passes.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/model_context.hpp"
#include "fusebench/mpi_comm.hpp"
#include "fusebench/nccl_comm.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/output_path.hpp"
#include "fusebench/report.hpp"
#include "fusebench/tp.hpp"
#include "measure/contention.hpp"
#include "options.hpp"
#include "runner/checkpoint_weights.hpp"
#include "runner/display.hpp"
#include "runner/filter.hpp"
#include "runner/group_runner.hpp"
#include "runner/groups.hpp"
#include "runner/interrupt.hpp"
#include "runner/launch_rank.hpp"
#include "runner/preflight.hpp"
#include "runner/progress.hpp"
#include "runner/report_writer.hpp"
#include "runner/run_context.hpp"
#include "runner/run_files.hpp"
#include "runner/sweep.hpp"
#include "runner/timing_setup.hpp"
#include "runner/verification.hpp"

using namespace fusebench;

namespace {

// Our help first, then Google Benchmark's (its Initialize would print only its own). True when
// --help was asked for (printed by rank 0 alone).
bool print_help_if_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") != 0 && std::strcmp(argv[i], "-h") != 0) continue;
    if (!bench::speaks_for_the_job()) return true;  // rank 0 prints it for the job
    bench::Options ignored;
    char help[] = "--help";
    char* help_argv[] = {argv[0], help, nullptr};
    bench::parse_options(2, help_argv, ignored);
    std::cout << "\nGoogle Benchmark's flags (fusebench's own engine times every entry, so "
                 "some are refused):\n"
              << bench::gbench_flags_help();
    return true;
  }
  return false;
}

// --list: the selected fixtures' names (with --list-bytes, the buffers check_fits_in_memory
// weighs and their group keys; in-process TP ranks each hold theirs).
void list_fixtures(const std::vector<bench::Fixture>& selected, bool bytes) {
  if (!bench::speaks_for_the_job()) return;  // under mpirun, rank 0 alone
  for (const auto& f : selected) {
    std::cout << f.name();
    if (bytes)
      std::cout << '\t' << bench::fixture_bytes(f) << '\t' << f.group_key() << '\t'
                << f.group_data_key();
    std::cout << "\n";
  }
}

// --report and --benchmark_out: neither may be an input of the run or the other output
// (input_files.hpp); --report's missing directories are created, and said. Rank 0 alone writes
// them. Returns how to write --benchmark_out (unset when not given).
OutputTarget check_outputs(const bench::Options& options, const bench::DisplayOptions& display) {
  if (!bench::speaks_for_the_job()) return {};
  return bench::check_run_files(options, display.out);
}

// Every rank needs rank 0's seed (their shards are slices of the same tensors). True on the other
// ranks of a multi-process run, which then followed rank 0's fixtures and wrote nothing.
bool share_seed_or_follow(std::uint64_t& seed, const bench::Sweep& sweep, Backend& backend,
                          const CommSettings& comm) {
  if (comm.world == nullptr) return false;
  std::vector<char> bytes(sizeof(seed));
  std::memcpy(bytes.data(), &seed, sizeof(seed));
  mpi_broadcast(bytes);
  std::memcpy(&seed, bytes.data(), sizeof(seed));
  if (comm.world->rank() == 0) return false;
  std::vector<TpMember> members;  // the sweep by index, as the leader names fixtures
  for (std::size_t i = 0; i < sweep.fixtures.size(); ++i)
    members.push_back(bench::tp_member(sweep.fixtures[i], i));
  TpRun::follow(members, backend, seed, comm);
  return true;
}

// The CPU GEMM libraries' threads for the whole run, before the first GEMM (contention.hpp).
nlohmann::json cpu_threads_for_run(const bench::Options& options, Backend& backend,
                                   const CommSettings& comm) {
  if (comm.world != nullptr && options.cpu_threads.is_auto())
    return {{"requested", "auto"},
            {"note",
             "multi-process run: the other ranks' polling would read as load, so each rank takes "
             "its share of the hardware threads (docs/tp.md)"}};
  return bench::apply_cpu_thread_policy(options, backend);
}

// The report of a run that ended at verification: its context (with the results), no entries.
void write_verification_report(const bench::Options& options, const nlohmann::json& context) {
  if (options.report.empty()) return;
  nlohmann::json ended = context;
  ended["interrupted"] = false;  // the run ended here, as it should
  write_file_atomically(
      options.report,
      sanitize({{"context", ended}, {"benchmarks", nlohmann::json::array()}}).dump(2));
}

// --verify (--verify-only): every variant at the run's shapes, before anything is timed. False
// (and the report written with the results) when one failed.
bool verify_first(const bench::Options& options, Backend& backend,
                  const std::vector<bench::Fixture>& selected, std::uint64_t seed,
                  nlohmann::json& context) {
  if (!options.verify && !options.verify_only) return true;
  const bench::VerificationRun verification = bench::run_verification(backend, selected, seed);
  context["verification"] = verification.results;
  context["verification_policy"] = bench::verification_policy();
  if (verification.passed) {
    std::cerr << "fusebench: verification passed\n";
    return true;
  }
  std::cerr << "fusebench: verification FAILED; not benchmarking wrong results\n";
  write_verification_report(options, context);
  return false;
}

// Ctrl-C, SIGTERM: the sweep stops at its next safe point (between blocks and groups) and writes
// what it measured, marked interrupted (interrupt.hpp). For the interrupt test
// (tests/scripts/test_interrupt_stress.sh): a real SIGINT at the N-th safe point, so every block
// boundary of a small sweep is hit, not one moment.
std::function<bool()> stop_on_signal() {
  if (const char* at = std::getenv("FUSEBENCH_TEST_SIGINT_AT_SAFE_POINT")) {
    return [left = std::atoll(at)]() mutable {
      if (--left == 0) bench::interrupt_self(SIGINT);
      return bench::interrupt_signal() != 0;
    };
  }
  return [] { return bench::interrupt_signal() != 0; };
}

// Launch-count and DRAM passes (docs/counters.md), probed once here so the context says which
// counters this run can read and why not.
void add_counter_passes(const bench::Options& options, Backend& backend,
                        const std::string& backend_reason, bench::GroupRunner& groups,
                        nlohmann::json& context) {
  CounterPassOptions pass_options;
  pass_options.launch_counts = options.launch_counts == "on";
  pass_options.dram_counters = options.dram_counters == "on";
  pass_options.backend_reason = backend_reason;
  CounterPasses passes = make_counter_passes(backend, pass_options);
  context["counters"] = passes.status;
  context["counter_passes"] = passes.setup;
  const nlohmann::json definitions = measured_counter_definitions();  // (items() of a temporary
  for (const auto& [counter, definition] : definitions.items())       // would dangle)
    context["counter_definitions"][counter] = definition;
  for (auto& collector : passes.collectors) groups.add_collector(std::move(collector));
}

// One registered benchmark per fixture, with its descriptive fields.
void register_fixtures(const bench::Sweep& sweep, Backend& backend, bench::FixtureRunner& runner,
                       bench::EntryFields& fields) {
  for (std::size_t i = 0; i < sweep.fixtures.size(); ++i) {
    const bench::Fixture& f = sweep.fixtures[i];
    const std::string name = f.name();
    fields.set_base(name, bench::fixture_fields(f, backend));
    auto* b = benchmark::RegisterBenchmark(
        name.c_str(), [&runner, f, i](benchmark::State& st) { runner.run(st, f, i); });
    // One iteration = one complete measurement under the stopping rule (fixture_runner.hpp).
    b->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
  }
}

// The progress counter counts entries; its ETA prices comparison groups, since a group is
// measured in its first member's call and the others return at once (progress.hpp).
std::vector<bench::PlannedFixture> planned_fixtures(const std::vector<bench::Fixture>& selected) {
  std::vector<bench::PlannedFixture> planned;
  for (const auto& f : selected) {
    const Cost cost = cost_of(f.plan());
    planned.push_back({f.name(), cost.flops, cost.bytes, f.group_key()});
  }
  return planned;
}

// The host's load over the run (start here, end and the worst group at every write) and the
// ceilings as the sweep raised them, with every entry's roofline_fraction on them.
void refresh_load_and_ceilings(bench::ReportWriter& writer, const bench::GroupRunner& groups,
                               const bench::TimingSetup& timing) {
  const nlohmann::json load_at_start = measure::to_json(measure::read_host_load());
  writer.set_refresh(
      [&groups, &timing, load_at_start](nlohmann::json& ctx, nlohmann::json& entries) {
        ctx["host_load"] = {{"start", load_at_start},
                            {"end", measure::to_json(measure::read_host_load())},
                            {"worst_group", groups.worst_load_json()}};
        if (timing.ceilings_log == nullptr) return;
        ctx["ceilings"] = timing.ceilings_log->json();
        const bool over_run = timing.ceilings_log->measurements() > 1;
        for (auto& e : entries) {
          if (!e.contains("roofline_fraction") || !e.contains("time_median")) continue;
          const std::string name = bench::fixture_name(e.value("run_name", ""));
          const double frac = timing.ceilings_log->fraction(name, e["time_median"].get<double>());
          if (frac >= 0) e["roofline_fraction"] = frac;
          // Which measurement judged it, once there are several (context.ceilings.over_run).
          if (const double at = timing.ceilings_log->judged_against_s(name); over_run && at >= 0)
            e["ceilings_at_s"] = at;
        }
      });
}

// After the sweep: the tallies, the report's last write and the exit code (128 + the signal of
// an interrupted run, the shell's convention: 130 for SIGINT, 143 for SIGTERM).
// --benchmark_out: where it goes, as given, and what the tee collected (null: not asked).
struct BenchmarkOut {
  const OutputTarget& target;
  const std::string& flag_value;
  const bench::BenchmarkOutTee* tee = nullptr;
};

int finish_run(const bench::Options& options, bench::ReportWriter& writer,
               const bench::GroupRunner& groups, std::size_t entries_planned,
               const BenchmarkOut& out) {
  std::cerr << "fusebench: " << groups.tally_text() << "\n";
  if (const std::string line = groups.contention_text(); !line.empty())
    std::cerr << "fusebench: " << line << "\n";
  benchmark::Shutdown();
  const int signal = bench::interrupt_signal();
  std::string interrupted;
  if (signal != 0) {
    const std::size_t written = writer.entries().size();
    interrupted = "stopped by " + bench::signal_name(signal) + " after " + std::to_string(written) +
                  " of " + std::to_string(entries_planned) + " entries: the " +
                  std::to_string(entries_planned - std::min(written, entries_planned)) +
                  " not measured are absent; a group stopped part-way is reported from the "
                  "blocks it had (its entries' timing_blocks_note says so)";
    writer.mark_interrupted(interrupted);
  } else {
    writer.mark_complete();
  }
  if (!options.report.empty()) {
    if (!writer.flush()) return 2;
    std::cerr << "fusebench: report written to " << options.report
              << (signal != 0 ? " (context.interrupted: true)" : "") << "\n";
  }
  if (out.tee != nullptr &&
      !bench::write_benchmark_out(out.target, out.flag_value, out.tee->text()))
    return 2;
  if (writer.failures() > 0)
    std::cerr << bench::failure_summary(writer.failures(), options.report) << "\n";
  if (signal != 0) {
    std::cerr << "fusebench: interrupted: " << interrupted << "\n";
    return 128 + signal;
  }
  return writer.failures() > 0 ? 1 : 0;
}

// The communicators: the link model of modelled collectives and, under mpirun, the world.
CommSettings comm_settings(const bench::Options& options, Backend& backend,
                           const std::unique_ptr<MpiSession>& mpi,
                           std::unique_ptr<Communicator>& world) {
  CommSettings comm;
  comm.requested = bench::to_string(options.comm);
  comm.link = options.link_profile == "measured" ? measure_link_profile(backend, comm)
                                                 : find_link_profile(options.link_profile);
  comm.timeout_s = default_comm_timeout();
  if (mpi && mpi->size() > 1) {
    world = backend.name() == "cpu" ? make_mpi_communicator(comm.timeout_s)
                                    : make_nccl_mpi_communicator(backend, comm.timeout_s);
    comm.world = world.get();
  }
  return comm;
}

// The sweep, from the options parsed: formed, verified, measured and reported. Throws on bad
// input (std::invalid_argument) before `measuring` is set.
int run_sweep(const std::vector<std::string>& args, const bench::Options& options,
              const bench::GbenchChoices& gbench, const bench::DisplayOptions& display,
              const std::unique_ptr<MpiSession>& mpi, bool& measuring) {
  BackendChoice choice = make_backend(parse_backend_kind(options.backend));
  Backend& backend = *choice.backend;
  // Rank 0 says it for the job: a line from every rank would interleave with rank 0's output on
  // the launcher's shared pipe (a rank whose backend then fails says so with its rank).
  if (bench::speaks_for_the_job())
    std::cerr << "fusebench: backend " << backend.name() << " (" << choice.reason << ")\n";
  std::unique_ptr<Communicator> world;
  CommSettings comm = comm_settings(options, backend, mpi, world);
  const bench::Sweep sweep = bench::build_sweep(options, backend, &comm);
  // What Google Benchmark will run (--benchmark_filter): listed, verified, sized, counted and
  // grouped (a comparison group is what the filter selects of it, groups.hpp).
  const bench::FixtureFilter filter(benchmark::GetBenchmarkFilter());
  const std::vector<bench::Fixture> selected = bench::select_fixtures(sweep.fixtures, filter);
  if (bench::speaks_for_the_job()) {  // under mpirun, rank 0 alone
    for (const auto& r : sweep.refused)
      std::cerr << "fusebench: " << r.op << " left out for " << r.model << ": " << r.reason << "\n";
  }
  if (options.list) {
    list_fixtures(selected, options.list_bytes);
    return 0;
  }
  const OutputTarget benchmark_out = check_outputs(options, display);
  // Checkpoint values that a narrower run dtype cannot hold: refused before anything runs.
  bench::check_checkpoint_values(selected);
  measuring = true;  // from here on a failure can be this rank's own (its memory, its GPU)
  bench::check_fits_in_memory(selected, backend);
  std::uint64_t seed = options.seed != 0 ? options.seed : std::random_device{}() | 1ull;
  if (share_seed_or_follow(seed, sweep, backend, comm)) return 0;

  const bench::RunDescription run{args, choice.reason, seed,
                                  cpu_threads_for_run(options, backend, comm), gbench.context};
  nlohmann::json context = bench::run_context(sweep, backend, run);
  // Regimes, stopping rule, measured ceilings (docs/timing.md); sets context["timing"].
  bench::TimingSetup timing = bench::setup_timing(options, backend, sweep, context);
  if (!verify_first(options, backend, selected, seed, context)) return 1;
  if (options.verify_only) {
    write_verification_report(options, context);
    std::cerr << "fusebench: --verify-only: every variant verified, nothing timed\n";
    return 0;
  }

  timing.settings.stop = stop_on_signal();
  bench::set_interrupt_exits_now(false);
  bench::EntryFields fields;
  // Comparison groups: the variants of one op at one shape and regime, measured interleaved
  // (docs/timing.md).
  bench::GroupRunner groups(backend, seed, sweep.fixtures,
                            bench::plan_groups(sweep.fixtures, filter.mask(sweep.fixtures)),
                            timing.settings, comm);
  bench::FixtureRunner runner(groups, fields);
  context["tp"] = tp_context(comm, mpi ? mpi->size() : 1);
  const nlohmann::json tp_definitions = tp_counter_definitions();
  for (const auto& [counter, definition] : tp_definitions.items())
    context["counter_definitions"][counter] = definition;
  add_counter_passes(options, backend, choice.reason, groups, context);
  register_fixtures(sweep, backend, runner, fields);
  std::vector<bench::PlannedFixture> planned = planned_fixtures(selected);
  const std::size_t entries_planned = planned.size();
  // The line moves with every block measured (run_observer.hpp); its estimate is priced from the
  // measured blocks within the timing policy's bounds (progress.hpp, SweepEta).
  const bench::BlockPolicy policy{groups.blocks(), timing.settings.engine.rule.min_time_s,
                                  timing.settings.engine.rule.max_time_s};
  std::unique_ptr<benchmark::BenchmarkReporter> shown = bench::make_display_reporter(display);
  bench::BenchmarkOutTee* out_file = nullptr;  // owned by the writer
  if (!display.out.empty() && bench::speaks_for_the_job()) {
    auto tee = std::make_unique<bench::BenchmarkOutTee>(std::move(shown), display.out_format);
    out_file = tee.get();
    shown = std::move(tee);
  }
  bench::ReportWriter writer(options.report, context, fields, std::move(shown),
                             bench::Progress(std::move(planned), std::cerr,
                                             bench::Progress::stderr_is_terminal(), policy));
  groups.set_observer(&writer.progress());
  refresh_load_and_ceilings(writer, groups, timing);
  benchmark::RunSpecifiedBenchmarks(&writer);
  groups.release();
  TpRun::release_followers(comm);
  if (writer.first_write_failed()) return 2;  // said; nothing was measured
  return finish_run(options, writer, groups, entries_planned,
                    {benchmark_out, display.out, out_file});
}

}  // namespace

int main(int argc, char** argv) {
  // The command line as given, for the report: Google Benchmark's Initialize removes its flags.
  const std::vector<std::string> args(argv, argv + argc);
  // Multi-process TP runs (mpirun, srun): one GPU per local rank unless the launcher chose, set
  // before anything touches CUDA; MPI bootstraps NCCL and carries rank 0's commands (docs/tp.md).
  pin_local_gpu();
  std::unique_ptr<MpiSession> mpi;
  if (launched_by_mpi() && mpi_built()) mpi = std::make_unique<MpiSession>(&argc, &argv);
  bench::install_interrupt_handlers();
  bench::set_interrupt_exits_now(true);  // until the sweep begins
  if (print_help_if_asked(argc, argv)) return 0;
  bench::DisplayOptions display;
  bench::GbenchChoices gbench;
  try {
    display = bench::display_options(args);    // before Initialize, which exits 0 on a bad format
    gbench = bench::check_gbench_flags(args);  // before Initialize, which ignores or misreads some
  } catch (const std::exception& e) {
    if (bench::speaks_for_the_job()) std::cerr << "fusebench: error: " << e.what() << "\n";
    return 2;
  }
  // --benchmark_out is the suite's to check and write (run_files.hpp): Google Benchmark never sees
  // it.
  std::vector<char*> gbench_argv = bench::argv_for_gbench(argc, argv);
  int gbench_argc = static_cast<int>(gbench_argv.size()) - 1;
  benchmark::Initialize(&gbench_argc, gbench_argv.data());
  bench::Options options;
  options.list = gbench.list;  // --benchmark_list_tests is --list
  if (int code = bench::parse_options(gbench_argc, gbench_argv.data(), options); code >= 0)
    return code;
  // Bad input (std::invalid_argument) is the same on every rank: rank 0 alone says it. Anything
  // else is this process's own failure, said with its rank.
  bool measuring = false;
  try {
    return run_sweep(args, options, gbench, display, mpi, measuring);
  } catch (const std::exception& e) {
    const bool bad_input = !measuring && dynamic_cast<const std::invalid_argument*>(&e);
    if (bench::speaks_for_the_job()) {
      std::cerr << "fusebench: error: " << e.what() << "\n";
    } else if (!bad_input) {
      std::cerr << "fusebench: rank " << bench::launcher_rank() << ": error: " << e.what() << "\n";
    }
    if (mpi && mpi->size() > 1) std::_Exit(2);  // the other ranks may wait on this one: end the job
    return 2;
  }
}
