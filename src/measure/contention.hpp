#pragma once
// How busy the host is while we measure, read from what Linux counts exactly (no privileges):
//   - /proc/self/task/<tid>/schedstat, field 2: nanoseconds each of our threads was runnable
//     but waiting for a CPU (run delay). Differenced around a sample, summed over our threads,
//     it says how long the sample waited for the scheduler: a preempted sample (below) is
//     dropped, as a throttled one is on the GPU;
//   - /proc/pressure/cpu (PSI "some": share of time some task waited for a CPU) and
//     /proc/loadavg, for the report's context;
//   - /proc/stat (all CPUs' busy time) against /proc/self/stat (ours): the CPU time other
//     processes took while a group was measured ("foreign" cores), the one measure that tells
//     a busy neighbour from our own threads when those alone outnumber the cores.
// Why: with a busy neighbour every parallel library call waits at its barrier for a
// descheduled worker, about one scheduler slice (8-12 ms here) per call whatever its size, so
// the variant with fewer calls "wins" by the call count (docs/timing.md, Contention).
// Every reader degrades to "unavailable: why" (e.g. gVisor has no schedstat); then no sample is
// dropped and the context says so.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace fusebench::measure {

// A sample is preempted when our threads together waited for a CPU longer than this fraction of
// the sample's wall time. 2%: a quiet machine shows well under 0.1% (wake-up latencies of
// library workers), one lost scheduler slice in a sample of ~1 ms is 100s of %, and a bias of a
// few % is what the 3% interval target must not absorb unseen.
inline constexpr double kPreemptedFraction = 0.02;

// True when `waited_s` of run delay over a sample of `wall_s` exceeds `fraction` of it.
bool is_preempted(double waited_s, double wall_s, double fraction = kPreemptedFraction);

// Run delay of this process's threads, per thread (tid -> ns waiting for a CPU).
using RunDelays = std::map<int, std::uint64_t>;

// Reads /proc/self/task/*/schedstat. Keeps each thread's file open between reads (a read is a
// pread of ~30 bytes), and notices threads that start or end.
class RunDelayProbe {
 public:
  RunDelayProbe();
  ~RunDelayProbe();
  RunDelayProbe(const RunDelayProbe&) = delete;
  RunDelayProbe& operator=(const RunDelayProbe&) = delete;

  bool available() const { return unavailable_.empty(); }
  const std::string& unavailable_reason() const { return unavailable_; }
  // Every thread's run delay now; empty when unavailable.
  RunDelays read();
  // Seconds of run delay between two reads, summed over the threads present in both.
  static double waited_seconds(const RunDelays& before, const RunDelays& after);

 private:
  std::map<int, int> fds_;  // tid -> open schedstat
  std::string unavailable_;
};

// The host's CPU counters at one moment (each optional: unavailable where the file is missing).
struct HostLoad {
  double at_s = 0;                         // steady clock, seconds
  std::optional<double> psi_some_avg10;    // %, PSI "some" over the last 10 s
  std::optional<double> psi_some_total_s;  // PSI "some" total, seconds
  std::optional<double> load1;             // load average, 1 minute
  std::optional<double> all_busy_s;        // /proc/stat: every CPU's non-idle time, seconds
  std::optional<double> self_cpu_s;        // /proc/self/stat: this process's utime + stime
  int cores = 0;                           // online CPUs
};
HostLoad read_host_load();

// What happened between two HostLoad readings.
struct LoadBetween {
  double wall_s = 0;
  std::optional<double> psi_some_fraction;  // share of the time some task waited for a CPU
  std::optional<double> foreign_cores;      // other processes' CPU use, in cores (average)
};
LoadBetween load_between(const HostLoad& a, const HostLoad& b);

// The parsers, apart so they are unit-tested on text: the run delay (field 2) of a schedstat
// line; PSI's "some avg10" (%) and "total" (us); /proc/stat's first line as (busy, all) jiffies;
// /proc/self/stat's utime + stime in jiffies. nullopt on malformed text.
std::optional<std::uint64_t> parse_schedstat_run_delay(const std::string& text);
struct PsiSome {
  double avg10 = 0;
  std::uint64_t total_us = 0;
};
std::optional<PsiSome> parse_psi_some(const std::string& text);
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_proc_stat_cpu(const std::string& text);
std::optional<std::uint64_t> parse_self_stat_cpu(const std::string& text);

nlohmann::json to_json(const HostLoad& load);
nlohmann::json to_json(const LoadBetween& load);

// The CPU GEMM libraries' thread count for a run (--cpu-threads=N|auto). auto: the cores that
// were not already busy with other processes at the start (measured over `probe_s` from
// /proc/stat), at least 1: a parallel call with more threads than free cores waits a scheduler
// slice per call for the descheduled worker, while fewer threads only lose parallelism.
struct ThreadPolicy {
  int threads = 0;  // >= 1
  std::string reason;
  nlohmann::json json;  // for context["cpu_threads"]
};
// `requested`: "auto" or a positive integer (validated by the caller). `cores`: online CPUs.
// `foreign_cores`: other processes' CPU use measured at the start (nullopt: unreadable).
ThreadPolicy choose_threads(const std::string& requested, int cores,
                            std::optional<double> foreign_cores);
// Measures foreign_cores over `probe_s` (our process idle meanwhile) and chooses.
ThreadPolicy measure_thread_policy(const std::string& requested, double probe_s = 0.3);

}  // namespace fusebench::measure
