// Contention (issue 19): the /proc parsers on text, the preempted-sample and contended-group
// rules on synthetic data, the thread policy, and the run-delay probe and the timing engine on
// a real contended thread: the test makes its own busy neighbour (child processes spinning on
// every core, killed after at most a few seconds). Assertions only go one way: a neighbour must
// be seen; no assertion needs this machine to be quiet.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "fusebench/backend.hpp"
#include "measure/contention.hpp"
#include "measure/interleave.hpp"
#include "measure/timing_engine.hpp"

using namespace fusebench;
using namespace fusebench::measure;

namespace {

// Busy child processes, one per core plus one, for at most `max_s` (each also dies on its own
// alarm, so a crashed test leaves nothing spinning).
class BusyNeighbours {
 public:
  explicit BusyNeighbours(double max_s) {
    const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) + 1;
    for (int i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        alarm(static_cast<unsigned>(max_s) + 1);
        volatile unsigned long x = 0;
        for (;;) x = x + 1;
      }
      if (pid > 0) pids_.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let them start
  }
  ~BusyNeighbours() {
    for (pid_t p : pids_) kill(p, SIGKILL);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
  }
  BusyNeighbours(const BusyNeighbours&) = delete;
  BusyNeighbours& operator=(const BusyNeighbours&) = delete;

 private:
  std::vector<pid_t> pids_;
};

void spin_for(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile unsigned long x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

}  // namespace

TEST(ContentionParsers, ReadWhatLinuxWrites) {
  EXPECT_EQ(parse_schedstat_run_delay("12345 678 9\n"), 678u);
  EXPECT_FALSE(parse_schedstat_run_delay("garbage"));
  const auto psi = parse_psi_some(
      "some avg10=12.50 avg60=3.00 avg300=0.10 total=987654\nfull avg10=0.00 avg60=0.00 "
      "avg300=0.00 total=0\n");
  ASSERT_TRUE(psi);
  EXPECT_DOUBLE_EQ(psi->avg10, 12.5);
  EXPECT_EQ(psi->total_us, 987654u);
  EXPECT_FALSE(parse_psi_some("full avg10=1"));
  // user nice system idle iowait irq softirq steal
  const auto cpu = parse_proc_stat_cpu("cpu  100 5 20 1000 7 1 2 3 0 0\ncpu0 1 2 3 4\n");
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->first, 100u + 5 + 20 + 1 + 2 + 3);
  EXPECT_EQ(cpu->second, cpu->first + 1000 + 7);
  // comm with spaces and a ')' inside: utime 14, stime 15 counted after the last ')'.
  EXPECT_EQ(parse_self_stat_cpu("42 (my (odd) name) R 1 2 3 4 5 6 7 8 9 10 111 222 13 14"),
            111u + 222u);
  EXPECT_FALSE(parse_self_stat_cpu("no parenthesis"));
}

TEST(ContentionRules, PreemptedAboveTheDocumentedFraction) {
  EXPECT_FALSE(is_preempted(0, 1e-3));
  EXPECT_FALSE(is_preempted(kPreemptedFraction * 1e-3 * 0.99, 1e-3));
  EXPECT_TRUE(is_preempted(kPreemptedFraction * 1e-3 * 1.01, 1e-3));
  EXPECT_TRUE(is_preempted(8e-3, 1e-3));  // one scheduler slice in a 1 ms sample
  EXPECT_FALSE(is_preempted(1, 0));       // no time: nothing to judge
}

TEST(ContentionRules, ContendedOnlyWherePreemptionOrANeighbourDecided) {
  using S = StopReason;
  // Device time: never contended.
  EXPECT_EQ(contention_stop(S::timed_out, false, true, 100, 90, 2.0), S::timed_out);
  // Checked: converged stays; a timeout with many preempted samples is contended, with few not.
  EXPECT_EQ(contention_stop(S::converged, true, true, 100, 50, 2.0), S::converged);
  EXPECT_EQ(contention_stop(S::timed_out, true, true, 100, 10, 0.0), S::contended);
  EXPECT_EQ(contention_stop(S::timed_out, true, true, 100, 9, 0.0), S::timed_out);
  EXPECT_EQ(contention_stop(S::blocks_disagree, true, true, 20, 6, 0.0), S::contended);
  // A member with every sample preempted has no figure: contended, however few were taken.
  EXPECT_EQ(contention_stop(S::timed_out, true, true, 3, 1, 0.0, true), S::contended);
  EXPECT_EQ(contention_stop(S::timed_out, true, false, 3, 1, 0.0, true), S::timed_out);
  // Few samples, a few lost: a slow group's wake-up hiccups, not contention.
  EXPECT_EQ(contention_stop(S::timed_out, true, true, 20, kContendedMinDrops - 1, 0.0),
            S::timed_out);
  EXPECT_EQ(contention_stop(S::timed_out, true, true, 100, 0, 2.0), S::timed_out);
  // Not checked (own threads fill the cores): the neighbours' CPU decides, converged or not.
  EXPECT_EQ(contention_stop(S::converged, true, false, 100, 0, 0.5), S::contended);
  EXPECT_EQ(contention_stop(S::converged, true, false, 100, 0, 0.1), S::converged);
  EXPECT_EQ(contention_stop(S::timed_out, true, false, 100, 0, std::nullopt), S::timed_out);
}

TEST(ThreadPolicy, FreeCoresAtTheStartOrWhatWasAsked) {
  EXPECT_EQ(choose_threads("auto", 2, 0.02).threads, 2);
  EXPECT_EQ(choose_threads("auto", 2, 0.9).threads, 1);
  EXPECT_EQ(choose_threads("auto", 2, 2.0).threads, 1);  // never 0
  EXPECT_EQ(choose_threads("auto", 8, 3.1).threads, 5);  // 0.1 of a core is not busy
  EXPECT_EQ(choose_threads("auto", 8, 3.3).threads, 4);
  EXPECT_EQ(choose_threads("auto", 2, std::nullopt).threads, 2);
  const ThreadPolicy asked = choose_threads("3", 2, 1.5);
  EXPECT_EQ(asked.threads, 3);
  EXPECT_EQ(asked.json.at("reason"), "--cpu-threads=3");
  const ThreadPolicy busy = choose_threads("auto", 2, 1.6);
  EXPECT_NE(busy.reason.find("1.60 cores"), std::string::npos) << busy.reason;
  EXPECT_EQ(busy.json.at("threads"), 1);
}

TEST(RunDelayProbe, SeesOurThreadWaitBesideABusyNeighbour) {
  RunDelayProbe probe;
  if (!probe.available()) GTEST_SKIP() << probe.unavailable_reason();
  const RunDelays before = probe.read();
  ASSERT_FALSE(before.empty());
  EXPECT_TRUE(before.count(static_cast<int>(gettid())));
  double waited = 0;
  {
    BusyNeighbours busy(3.0);
    const RunDelays start = probe.read();
    spin_for(0.4);  // runnable all along, beside cores + 1 spinning processes
    waited = RunDelayProbe::waited_seconds(start, probe.read());
  }
  // With more runnable tasks than cores, the fair scheduler leaves our thread waiting for a
  // good share of the 0.4 s (about 1/3 on two cores); 20 ms is a bound no loaded machine misses.
  EXPECT_GT(waited, 0.02) << "run delay over 0.4 s of spinning beside busy neighbours";
}

TEST(HostLoad, ForeignCoresSeeTheNeighbour) {
  const HostLoad a = read_host_load();
  if (!a.all_busy_s || !a.self_cpu_s) GTEST_SKIP() << "/proc/stat or /proc/self/stat unreadable";
  LoadBetween load;
  {
    BusyNeighbours busy(3.0);
    const HostLoad start = read_host_load();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    load = load_between(start, read_host_load());
  }
  ASSERT_TRUE(load.foreign_cores);
  EXPECT_GT(*load.foreign_cores, 0.5) << "children spinning on every core";
  EXPECT_GT(load.wall_s, 0.4);
}

TEST(TimingEngine, DropsPreemptedSamplesAndSaysContended) {
  RunDelayProbe probe;
  if (!probe.available()) GTEST_SKIP() << probe.unavailable_reason();
  auto backend = make_cpu_backend();
  // Two members spinning ~2 ms a run: beside neighbours on every core most samples wait.
  std::vector<TimedMember> members(2);
  members[0].label = "split";
  members[0].run_set = [](std::size_t) { spin_for(2e-3); };
  members[1].label = "fused";
  members[1].run_set = [](std::size_t) { spin_for(2e-3); };
  EngineSettings settings;
  settings.rule.target_ci = 1e-9;  // never met: the group runs to its timeout
  settings.rule.min_time_s = 0;
  settings.rule.max_time_s = 0.4;
  settings.run_delay = &probe;
  GroupMeasurement g;
  {
    BusyNeighbours busy(4.0);
    g = measure_group(Regime::eager, *backend, members, 0, settings);
  }
  EXPECT_TRUE(g.preemption_checked);
  std::size_t dropped = 0, taken = 0;
  for (const auto& m : g.members) {
    dropped += m.summary.dropped_preempted;
    taken += m.samples.size();
    EXPECT_TRUE(m.summary.waited_known);
    for (const Sample& s : m.samples) EXPECT_GE(s.waited_s, 0);
  }
  EXPECT_GT(dropped, 0u) << "of " << taken << " samples";
  // Preempted samples are kept for the counts and pair with nothing.
  for (const auto& m : g.members) {
    std::size_t valid = 0;
    for (const auto& v : m.round_values) valid += v.has_value();
    EXPECT_EQ(valid + m.summary.dropped_preempted, m.samples.size());
  }
  if (dropped * 10 >= taken && dropped >= kContendedMinDrops) {
    EXPECT_EQ(g.stop, StopReason::contended);
  }
  ASSERT_TRUE(g.load.foreign_cores);
  EXPECT_GT(*g.load.foreign_cores, 0.5);

  // Without the check (a group whose own threads fill the cores), nothing is dropped and the
  // neighbours' CPU makes it contended.
  settings.drop_preempted = false;
  {
    BusyNeighbours busy(4.0);
    g = measure_group(Regime::eager, *backend, members, 0, settings);
  }
  EXPECT_FALSE(g.preemption_checked);
  for (const auto& m : g.members) EXPECT_EQ(m.summary.dropped_preempted, 0u);
  EXPECT_EQ(g.stop, StopReason::contended);
}
