#include "measure/contention.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace fusebench::measure {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::optional<std::string> slurp(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Reads the whole of an open /proc file from its start (seq files regenerate on pread at 0).
std::optional<std::string> pread_all(int fd) {
  char buf[256];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

double ticks_per_second() {
  static const double hz = [] {
    const long v = sysconf(_SC_CLK_TCK);
    return v > 0 ? static_cast<double>(v) : 100.0;
  }();
  return hz;
}

}  // namespace

bool is_preempted(double waited_s, double wall_s, double fraction) {
  return wall_s > 0 && waited_s > fraction * wall_s;
}

std::optional<std::uint64_t> parse_schedstat_run_delay(const std::string& text) {
  unsigned long long on_cpu = 0, delay = 0;
  if (std::sscanf(text.c_str(), "%llu %llu", &on_cpu, &delay) != 2) return std::nullopt;
  return static_cast<std::uint64_t>(delay);
}

std::optional<PsiSome> parse_psi_some(const std::string& text) {
  // "some avg10=0.00 avg60=0.00 avg300=0.00 total=12345"
  double avg10 = 0, avg60 = 0, avg300 = 0;
  unsigned long long total = 0;
  if (std::sscanf(text.c_str(), "some avg10=%lf avg60=%lf avg300=%lf total=%llu", &avg10, &avg60,
                  &avg300, &total) != 4)
    return std::nullopt;
  return PsiSome{avg10, static_cast<std::uint64_t>(total)};
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_proc_stat_cpu(
    const std::string& text) {
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
  unsigned long long v[8] = {};
  if (std::sscanf(text.c_str(), "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                  &v[3], &v[4], &v[5], &v[6], &v[7]) < 4)
    return std::nullopt;
  // Busy: user, nice, system, irq, softirq, steal (guest is inside user). Steal counts as busy:
  // the hypervisor gave our vCPU to someone else.
  const std::uint64_t idle = v[3] + v[4];
  const std::uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return std::make_pair(busy, busy + idle);
}

std::optional<std::uint64_t> parse_self_stat_cpu(const std::string& text) {
  // "pid (comm) state ppid ..." : comm may hold spaces and parentheses; fields restart after the
  // last ')'. utime and stime are fields 14 and 15 (1-based), i.e. the 12th and 13th after it.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(close + 1));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 1; i <= 13; ++i) {
    if (!(in >> field)) return std::nullopt;
    if (i == 12) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 13) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return static_cast<std::uint64_t>(utime + stime);
}

RunDelayProbe::RunDelayProbe() {
  const int fd = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    unavailable_ =
        "/proc/self/schedstat is not readable (kernel without schedstats, or a "
        "sandbox such as gVisor): preempted samples cannot be detected";
    return;
  }
  const auto text = pread_all(fd);
  close(fd);
  if (!text || !parse_schedstat_run_delay(*text)) {
    unavailable_ =
        "/proc/self/schedstat does not hold the run delay: preempted samples cannot "
        "be detected";
  }
}

RunDelayProbe::~RunDelayProbe() {
  for (const auto& [tid, fd] : fds_) close(fd);
}

RunDelays RunDelayProbe::read() {
  RunDelays out;
  if (!available()) return out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  std::vector<int> alive;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    alive.push_back(std::atoi(e->d_name));
  }
  closedir(dir);
  std::map<int, int> kept;
  for (int tid : alive) {
    int fd = -1;
    if (auto it = fds_.find(tid); it != fds_.end()) {
      fd = it->second;
      fds_.erase(it);
    } else {
      const std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
      fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;  // the thread ended meanwhile
    }
    const auto text = pread_all(fd);
    const auto delay = text ? parse_schedstat_run_delay(*text) : std::nullopt;
    if (!delay) {
      close(fd);
      continue;
    }
    out[tid] = *delay;
    kept[tid] = fd;
  }
  for (const auto& [tid, fd] : fds_) close(fd);  // threads that ended
  fds_ = std::move(kept);
  return out;
}

double RunDelayProbe::waited_seconds(const RunDelays& before, const RunDelays& after) {
  std::uint64_t ns = 0;
  for (const auto& [tid, delay] : after) {
    // A thread that started during the interval counts from zero; one that ended is not seen
    // (its wait is lost, never negative).
    const auto it = before.find(tid);
    const std::uint64_t from = it == before.end() ? 0 : it->second;
    if (delay > from) ns += delay - from;
  }
  return static_cast<double>(ns) * 1e-9;
}

HostLoad read_host_load() {
  HostLoad h;
  h.at_s = now_s();
  h.cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  if (const auto psi = slurp("/proc/pressure/cpu")) {
    if (const auto some = parse_psi_some(*psi)) {
      h.psi_some_avg10 = some->avg10;
      h.psi_some_total_s = static_cast<double>(some->total_us) * 1e-6;
    }
  }
  if (const auto avg = slurp("/proc/loadavg")) {
    double l1 = 0;
    if (std::sscanf(avg->c_str(), "%lf", &l1) == 1) h.load1 = l1;
  }
  if (const auto stat = slurp("/proc/stat")) {
    if (const auto cpu = parse_proc_stat_cpu(*stat))
      h.all_busy_s = static_cast<double>(cpu->first) / ticks_per_second();
  }
  if (const auto self = slurp("/proc/self/stat")) {
    if (const auto cpu = parse_self_stat_cpu(*self))
      h.self_cpu_s = static_cast<double>(*cpu) / ticks_per_second();
  }
  return h;
}

LoadBetween load_between(const HostLoad& a, const HostLoad& b) {
  LoadBetween out;
  out.wall_s = b.at_s - a.at_s;
  if (!(out.wall_s > 0)) return out;
  if (a.psi_some_total_s && b.psi_some_total_s)
    out.psi_some_fraction =
        std::clamp((*b.psi_some_total_s - *a.psi_some_total_s) / out.wall_s, 0.0, 1.0);
  if (a.all_busy_s && b.all_busy_s && a.self_cpu_s && b.self_cpu_s) {
    const double others = (*b.all_busy_s - *a.all_busy_s) - (*b.self_cpu_s - *a.self_cpu_s);
    // Jiffies are 10 ms: over short intervals the difference can dip below 0 by a tick.
    out.foreign_cores = std::max(0.0, others / out.wall_s);
  }
  return out;
}

nlohmann::json to_json(const HostLoad& load) {
  nlohmann::json j = nlohmann::json::object();
  if (load.psi_some_avg10) j["psi_cpu_some_avg10_percent"] = *load.psi_some_avg10;
  if (load.load1) j["load_avg_1m"] = *load.load1;
  if (!load.psi_some_avg10) j["psi_unavailable"] = "/proc/pressure/cpu is not readable";
  return j;
}

nlohmann::json to_json(const LoadBetween& load) {
  nlohmann::json j = {{"seconds", load.wall_s}};
  if (load.psi_some_fraction) j["psi_cpu_some_fraction"] = *load.psi_some_fraction;
  if (load.foreign_cores) j["foreign_cpu_cores"] = *load.foreign_cores;
  return j;
}

ThreadPolicy choose_threads(const std::string& requested, int cores,
                            std::optional<double> foreign_cores) {
  ThreadPolicy p;
  cores = std::max(1, cores);
  p.json = {{"requested", requested}, {"cores", cores}};
  if (foreign_cores) p.json["foreign_cores_at_start"] = *foreign_cores;
  if (requested != "auto") {
    p.threads = std::stoi(requested);
    p.reason = "--cpu-threads=" + requested;
  } else if (!foreign_cores) {
    p.threads = cores;
    p.reason = "auto: every core (/proc/stat unreadable, so the load at the start is unknown)";
  } else {
    // A core counts as busy when other processes used more than a fifth of it.
    const int busy = static_cast<int>(std::max(0.0, std::ceil(*foreign_cores - 0.2)));
    p.threads = std::max(1, cores - busy);
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  "auto: %d of %d cores free at the start (other processes used %.2f cores)",
                  std::max(0, cores - busy), cores, *foreign_cores);
    p.reason = buf;
    if (cores - busy < 1) p.reason += "; 1 thread, so no call waits for a descheduled worker";
  }
  p.json["threads"] = p.threads;
  p.json["reason"] = p.reason;
  p.json["rule"] =
      "auto: threads = cores - cores busy with other processes at the start (busy: more than 0.2 "
      "of a core over 0.3 s of /proc/stat), at least 1; a parallel call with more threads than "
      "free cores waits about one scheduler slice per call for its descheduled worker";
  return p;
}

ThreadPolicy measure_thread_policy(const std::string& requested, double probe_s) {
  if (requested != "auto") return choose_threads(requested, read_host_load().cores, std::nullopt);
  const HostLoad a = read_host_load();
  std::this_thread::sleep_for(std::chrono::duration<double>(probe_s));
  const HostLoad b = read_host_load();
  return choose_threads(requested, a.cores, load_between(a, b).foreign_cores);
}

}  // namespace fusebench::measure
