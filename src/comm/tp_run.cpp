#include "comm/tp_run.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <stdexcept>
#include <thread>

#include "comm/start_line.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/local_device.hpp"
#include "fusebench/mpi_comm.hpp"
#include "fusebench/nccl_comm.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/overlap.hpp"
#include "fusebench/tp.hpp"
#include "measure/timing_policy.hpp"

#ifdef FUSEBENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fusebench {
namespace {

// Leader -> follower commands of a multi-process run: group(n) then n x member(sweep index)
// opens a group; run(k) runs its member k once; compute(k), compute_reps(n),
// compute_block_ms(t) run member k's compute pass (n runs with collectives skipped, after a
// barrier, behind a blocking kernel of t ms when t > 0) and gather every rank's time; end closes
// the group; quit ends the sweep.
enum class Command : std::int32_t {
  group = 1,
  member = 2,
  run = 3,
  end = 4,
  quit = 5,
  compute = 6,
  compute_reps = 7,
  compute_block_ms = 8,
};

void send(Command c, std::int32_t arg = 0) {
  std::vector<char> msg(8);
  const auto code = static_cast<std::int32_t>(c);
  std::memcpy(msg.data(), &code, 4);
  std::memcpy(msg.data() + 4, &arg, 4);
  mpi_broadcast(msg);
}

std::pair<Command, std::int32_t> receive() {
  std::vector<char> msg(8);
  mpi_broadcast(msg);
  std::int32_t code = 0, arg = 0;
  std::memcpy(&code, msg.data(), 4);
  std::memcpy(&arg, msg.data() + 4, 4);
  return {static_cast<Command>(code), arg};
}

bool multi_process(const CommSettings& s) { return s.world != nullptr && s.world->size() > 1; }

std::string config_of(const TpMember& f, std::uint64_t seed) {
  return tp_config_string(f.op, f.variant, f.shard, f.tokens, f.dtype, seed) + " comm=" + f.comm +
         (f.weights ? " weights=" + f.weights->describe() : "");
}

// Times every collective of this rank on the backend's clock (CUDA events on the GPU). Each
// timer read synchronises, so this pass is kept apart from the timed one.
class TimedCollectives final : public Communicator {
 public:
  TimedCollectives(Communicator& inner, Backend& backend) : inner_(inner), backend_(backend) {}
  std::string name() const override { return inner_.name(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce(const MatRef& d) override {
    timed(CollectiveKind::all_reduce, [&] { inner_.all_reduce(d); });
  }
  void all_gather(const MatRef& s, const MatRef& d) override {
    timed(CollectiveKind::all_gather, [&] { inner_.all_gather(s, d); });
  }
  void reduce_scatter(const MatRef& s, const MatRef& d) override {
    timed(CollectiveKind::reduce_scatter, [&] { inner_.reduce_scatter(s, d); });
  }
  void all_gather_rows(const MatRef& s, const MatRef& d) override {
    timed(CollectiveKind::all_gather, [&] { inner_.all_gather_rows(s, d); });
  }
  void all_to_all_rows(const MatRef& s, const std::vector<std::int64_t>& sent, const MatRef& d,
                       const std::vector<std::int64_t>& received) override {
    timed(CollectiveKind::all_to_all, [&] { inner_.all_to_all_rows(s, sent, d, received); });
  }
  void reserve(std::size_t bytes) override { inner_.reserve(bytes); }
  void check_same_config(const std::string& c) override { inner_.check_same_config(c); }
  std::map<CollectiveKind, double> seconds;

 private:
  template <class F>
  void timed(CollectiveKind kind, F&& f) {
    auto timer = backend_.make_timer();
    timer->start();
    f();
    timer->stop();
    seconds[kind] += timer->seconds();
  }
  Communicator& inner_;
  Backend& backend_;
};

// Enough repetitions for a stable mean without dominating the fixture: at least 3, up to
// about 50 ms or 200 runs.
template <class F>
int repetitions_for(F&& once, Backend& backend) {
  auto timer = backend.make_timer();
  timer->start();
  once();
  timer->stop();
  const double t = std::max(timer->seconds(), 1e-7);
  return static_cast<int>(std::clamp(0.05 / t, 3.0, 200.0));
}

// Device seconds per run of `once` over `reps` runs. With `dev`, chunks of runs are enqueued
// behind its blocking kernel (as the batch regime does), with the queue bound of that regime;
// `*host_gaps` says whether a chunk was not enqueued in time (the figure then includes gaps).
template <class F>
double seconds_per_run(F&& once, Backend& backend, int reps, int launches,
                       measure::DeviceTiming* dev, double block_timeout_s, bool* host_gaps) {
  auto timer = backend.make_timer();
  if (dev == nullptr) {
    timer->start();
    for (int i = 0; i < reps; ++i) once();
    timer->stop();
    return timer->seconds() / reps;
  }
  const int chunk = static_cast<int>(measure::max_runs_behind_block(launches));
  double total = 0;
  for (int done = 0; done < reps;) {
    const int n = std::min(chunk, reps - done);
    measure::enqueue_held(*dev, block_timeout_s, [&] {
      timer->start();
      for (int i = 0; i < n; ++i) once();
      timer->stop();
    });
    total += timer->seconds();
    backend.synchronize();
    if (dev->block_timed_out()) *host_gaps = true;
    done += n;
  }
  return total / reps;
}

// One rank's compute pass: `reps` runs of its workspace with the collectives skipped, seconds
// per run (behind `dev`'s blocking kernel when given).
double compute_pass(Workspace& ws, int rank, int tp, int reps, measure::DeviceTiming* dev,
                    double block_timeout_s, bool* host_gaps) {
  SkipCollectives skip(rank, tp);
  Backend& backend = ws.backend();
  const double s = seconds_per_run([&] { ws.run(&skip); }, backend, reps,
                                   cost_of(ws.plan()).launches, dev, block_timeout_s, host_gaps);
  backend.synchronize();
  return s;
}

// A rank's blocking-kernel timing for its compute passes, made on first use (GPU ranks whose
// rank 0 times behind one); null where the backend has none.
measure::DeviceTiming* device_timing_for(Backend& backend,
                                         std::unique_ptr<measure::DeviceTiming>& cache,
                                         bool wanted) {
  if (!wanted) return nullptr;
  if (!cache) {
    std::string why;
    cache = measure::make_device_timing(backend, &why);
  }
  return cache.get();
}

// GEMM threads for each of `ranks` ranks sharing this machine's cores: on two cores, two ranks
// with two library threads each oversubscribed them and moved sp/overlap ratios by up to 60%
// between back-to-back runs (one thread each: within 10%). No effect on GPU backends.
int host_threads_per_rank(int ranks) {
  // The run's thread policy (--cpu-threads: the cores free at the start), else every core.
  const int budget = Backend::host_thread_budget();
  const int hw =
      budget > 0 ? budget : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, hw / std::max(1, ranks));
}

// Ranks of a multi-process run on this machine: the launcher's local size, else all of them.
int local_ranks(int world) {
  return launcher_local_size([](const char* v) { return std::getenv(v); }).value_or(world);
}

}  // namespace

nlohmann::json tp_context(const CommSettings& s, int processes) {
  return {{"comm_requested", s.requested},
          {"processes", processes},
          {"comm_timeout_s", s.timeout_s},
          {"link_profile",
           {{"name", s.link.name},
            {"latency_s", s.link.latency_s},
            {"busbw_bytes_per_s", s.link.busbw},
            {"source", s.link.source}}},
          {"link_model",
           "t = latency + bytes * f / busbw; f = 2(n-1)/n all-reduce, (n-1)/n all-gather "
           "(nccl-tests busbw conventions; all-gather bytes = total gathered size)"},
          {"modelled_entries",
           "name and fields say comm:modelled: one rank's compute measured, collectives priced "
           "by the link model and stood in as a delay of that length"}};
}

nlohmann::json tp_counter_definitions() {
  return {
      {"comm_bytes",
       "payload bytes handed to collectives per iteration (all-reduce: M*hidden*dtype; "
       "all-gather: the total gathered size)"},
      {"comm_bytes_measured",
       "payload bytes rank 0's communicator (inprocess, mpi, nccl) handed its transport per "
       "iteration, counted call by call in the report pass (nccl-tests sizes; the MPI "
       "communicator sums in fp32, so its all-reduce and reduce-scatter of bf16 count twice "
       "comm_bytes); <kind>_bytes_measured per collective kind; the field "
       "comm_bytes_measured_per_rank every local rank's"},
      {"comm_bytes_modelled",
       "comm:modelled entries: the bytes the modelled communicator priced per iteration, call "
       "by call (it moves no data); <kind>_bytes_modelled per kind"},
      {"comm_wire_bytes",
       "bytes one rank sends on a ring per iteration: comm_bytes * bus factor (all-reduce "
       "2(n-1)/n, all-gather and reduce-scatter (n-1)/n)"},
      {"padded_tokens",
       "rows sp/overlap compute beyond the tokens: M padded to a multiple of tp (0 otherwise)"},
      {"comm_modelled",
       "1 when the communication figures come from the link model, 0 when measured"},
      {"compute_seconds",
       "the pipeline with collectives skipped, run on every rank at once after a barrier (so the "
       "ranks compete for the machine as in the timed pipeline), seconds per run of the slowest "
       "rank; comm:modelled: the one rank's"},
      {"compute_ranks", "ranks that ran the compute pass at once (1 for comm:modelled)"},
      {"compute_seconds_fastest_rank", "the fastest rank's compute pass, seconds per run"},
      {"compute_seconds_rank<r>",
       "rank r's compute pass, seconds per run (every rank's, when more than one ran it)"},
      {"compute_slowest_rank",
       "the rank whose compute pass took longest (the pipeline waits for it at its collective)"},
      {"compute_imbalance", "slowest rank's compute seconds / the mean over the ranks"},
      {"compute_wait_fraction",
       "of the ranks' compute-pass time, the share the other ranks spend waiting for the "
       "slowest: sum over ranks of (slowest - own) / (ranks * slowest)"},
      {"comm_seconds",
       "collectives per iteration: measured one by one on rank 0 (including waiting "
       "for peers), or modelled (comm_modelled=1)"},
      {"total_seconds", "compute_seconds + comm_seconds (real_time is the timed pipeline itself)"},
      {"comm_by_difference_seconds",
       "real_time (median) - compute_seconds, unclamped, on every entry with collectives: what "
       "the pipeline costs beyond its compute. On one-lane variants (naive, paired, sp) it is "
       "the communication measured a second way, a cross-check of comm_seconds (the one-by-one "
       "collectives include waiting for peers; a negative value is noise)"},
      {"comm_exposed_seconds",
       "variants with a communication lane (overlap): communication the compute does not cover, "
       "comm_by_difference_seconds clamped to [0, comm_seconds] (comm:modelled: the stand-in "
       "delays the timed pipeline ran)"},
      {"comm_hidden_seconds",
       "variants with a communication lane (overlap): comm_seconds - comm_exposed_seconds, the "
       "communication under compute"},
      {"comm_hidden_fraction", "comm_hidden_seconds / comm_seconds (overlap)"},
      {"modelled_pipeline_seconds",
       "comm:modelled entries: the plan's steps scheduled on their lanes with compute_seconds "
       "shared among the compute steps by their roofline time and every collective priced by "
       "the link model (overlap: per chunk the larger of compute and communication, plus the "
       "pipeline fill); modelled"},
      {"modelled_comm_exposed_seconds",
       "comm:modelled entries: modelled_pipeline_seconds - the compute steps' sum, clamped to "
       "[0, comm_seconds]; modelled"},
      {"modelled_comm_hidden_seconds", "comm_seconds - modelled_comm_exposed_seconds; modelled"},
      {"modelled_comm_hidden_fraction", "modelled_comm_hidden_seconds / comm_seconds; modelled"},
      {"all_reduce_seconds", "all-reduce time per iteration (measured or modelled)"},
      {"all_reduce_busbw", "all-reduce bus bandwidth, bytes/s: bytes/time * 2(n-1)/n"},
      {"all_gather_busbw", "all-gather bus bandwidth, bytes/s: total bytes/time * (n-1)/n"},
      {"all_reduce_algbw", "all-reduce bytes / time"},
      {"all_gather_algbw", "all-gather total gathered bytes / time"}};
}

std::string resolve_comm(const CommSettings& s, const Backend& backend, const std::string& op,
                         int tp) {
  if (!is_tp_op(op)) return "";
  if (tp == 1) return "none";
  const bool gpu = backend.name() != "cpu";
  const std::string& r = s.requested;
  if (multi_process(s)) {
    const int world = s.world->size();
    if (tp != world) {
      throw std::invalid_argument(
          "--tp=" + std::to_string(tp) + " but this run has " + std::to_string(world) +
          " processes: under mpirun/srun every tp > 1 must equal the process count");
    }
    const std::string native = gpu ? "nccl" : "mpi";
    if (r != "auto" && r != native) {
      throw std::invalid_argument(
          "--comm=" + r + " under mpirun/srun: this run's ranks communicate with " + native);
    }
    return native;
  }
  if (r == "auto") {
    if (!gpu) return "inprocess";
    return nccl_built() && cuda_device_count() >= tp ? "nccl" : "modelled";
  }
  if (r == "modelled") return r;
  if (r == "nccl") {
    if (!gpu) throw std::invalid_argument("--comm=nccl needs the CUDA backend");
    if (!nccl_built()) throw std::invalid_argument("--comm=nccl: this build has no NCCL");
    if (cuda_device_count() < tp) {
      throw std::invalid_argument("--comm=nccl: tp=" + std::to_string(tp) + " needs " +
                                  std::to_string(tp) + " GPUs in this process (" +
                                  std::to_string(cuda_device_count()) + " visible) or mpirun -np " +
                                  std::to_string(tp) +
                                  "; NCCL refuses two ranks on one GPU. Use --comm=modelled");
    }
    return r;
  }
  if (r == "inprocess") {
    if (gpu) throw std::invalid_argument("--comm=inprocess sums host buffers: use --backend=cpu");
    return r;
  }
  if (r == "mpi") {
    throw std::invalid_argument(
        "--comm=mpi needs a launch by mpirun/srun with as many processes as tp");
  }
  throw std::invalid_argument("--comm=" + r + " is invalid (auto, nccl, modelled, inprocess, mpi)");
}

// A rank of a single-process run on its own thread, with its own backend and one workspace per
// member; it runs the jobs rank 0 posts (a member once, or a member's compute pass), in order
// with rank 0.
struct TpRun::LocalRank {
  int rank = 0;
  int tp = 1;
  int host_threads = 0;  // GEMM threads of its CPU backend (0: the libraries' defaults)
  comm::StartLine* start_line = nullptr;
  double timeout_s = 120;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<measure::DeviceTiming> device;  // made on the first compute pass that wants it
  std::vector<std::unique_ptr<Workspace>> ws;     // one per member
  std::unique_ptr<Communicator> comm;
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false, stop = false, has_comm = false;
  std::deque<Job> posted;            // oldest first; popped once done
  std::vector<std::string> configs;  // one per member, checked in member order
  double compute_s = 0;              // the last compute pass: seconds per run
  bool host_gaps = false;            // ... and whether its blocking kernel timed out
  std::exception_ptr error;
  std::thread thread;

  void start(const std::vector<TpMember>& members, std::uint64_t seed, bool cuda) {
    thread = std::thread([this, members, seed, cuda] {
      try {
        std::string why;
        backend = cuda ? make_cuda_backend_on(rank, &why) : make_cpu_backend();
        if (!backend) throw std::runtime_error("rank " + std::to_string(rank) + ": " + why);
        backend->set_host_threads(host_threads);
        for (const TpMember& f : members) {
          ShardShape s = f.shard;
          s.rank = rank;
          ws.push_back(std::make_unique<Workspace>(
              *backend, build_plan(f.op, f.variant, s, f.tokens, f.dtype), seed, f.weights));
        }
        {
          std::unique_lock lock(mu);
          ready = true;
          cv.notify_all();
          cv.wait(lock, [&] { return has_comm || stop; });
          if (stop) return;
        }
        for (const auto& config : configs) comm->check_same_config(config);
        while (true) {
          Job job;
          {
            std::unique_lock lock(mu);
            cv.wait(lock, [&] { return !posted.empty() || stop; });
            if (posted.empty()) return;  // stop, nothing left to run
            job = posted.front();
          }
          Workspace& w = *ws.at(job.member);
          double seconds = 0;
          bool gaps = false;
          if (job.compute_reps > 0) {
            measure::DeviceTiming* dev = device_timing_for(*backend, device, job.device);
            start_line->arrive_and_wait(timeout_s);
            seconds = compute_pass(w, rank, tp, job.compute_reps, dev, job.block_timeout_s, &gaps);
          } else {
            w.run(comm.get());
          }
          std::lock_guard lock(mu);
          if (job.compute_reps > 0) {
            compute_s = seconds;
            host_gaps = gaps;
          }
          posted.pop_front();
          cv.notify_all();
        }
      } catch (...) {
        std::lock_guard lock(mu);
        error = std::current_exception();
        ready = true;
        cv.notify_all();
      }
    });
  }
  void rethrow() {
    if (error) std::rethrow_exception(error);
  }
};

TpRun::TpRun(std::vector<Workspace*> workspaces, std::vector<TpMember> members, std::uint64_t seed,
             const CommSettings& s)
    : ws_(std::move(workspaces)), members_(std::move(members)), settings_(s) {
  if (ws_.empty() || ws_.size() != members_.size())
    throw std::logic_error("TpRun: one workspace per member is needed");
  kind_ = members_.front().comm;
  const int tp = members_.front().shard.tp;
  for (const TpMember& m : members_) {
    if (m.comm != kind_ || m.shard.tp != tp)
      throw std::logic_error("TpRun: the members of a group share tp and comm");
  }
  if (kind_ == "none" || kind_.empty()) return;
  if (kind_ == "modelled") {
    own_comm_ = make_modelled_communicator(tp, s.link, ws_.front()->backend());
    comm_ = own_comm_.get();
    return;
  }
  if (multi_process(s)) {
    comm_ = s.world;
    leader_ = comm_->rank() == 0;
    host_threads_ = host_threads_per_rank(local_ranks(comm_->size()));
    if (leader_) {
      for (const TpMember& m : members_) {
        if (m.index < 0)
          throw std::logic_error("TP fixture " + m.op + "/" + m.variant + " is not in the sweep");
      }
      send(Command::group, static_cast<std::int32_t>(members_.size()));
      for (const TpMember& m : members_) send(Command::member, m.index);
    }
    for (const TpMember& m : members_) comm_->check_same_config(config_of(m, seed));
    split_host_threads();
    return;
  }
  // Single process: ranks 1..tp-1 on threads.
  const bool cuda = kind_ == "nccl";
  start_line_ = std::make_unique<comm::StartLine>(tp);
  host_threads_ = host_threads_per_rank(tp);
  for (int r = 1; r < tp; ++r) {
    auto lr = std::make_unique<LocalRank>();
    lr->rank = r;
    lr->tp = tp;
    lr->host_threads = host_threads_;
    lr->start_line = start_line_.get();
    lr->timeout_s = s.timeout_s;
    for (const TpMember& m : members_) lr->configs.push_back(config_of(m, seed));
    lr->start(members_, seed, cuda);
    local_.push_back(std::move(lr));
  }
  for (auto& lr : local_) {
    std::unique_lock lock(lr->mu);
    lr->cv.wait(lock, [&] { return lr->ready; });
  }
  try {
    for (auto& lr : local_) lr->rethrow();
    std::vector<std::unique_ptr<Communicator>> comms;
    if (cuda) {
      std::vector<Backend*> backends{&ws_.front()->backend()};
      std::vector<int> devices{0};
      for (auto& lr : local_) {
        backends.push_back(lr->backend.get());
        devices.push_back(lr->rank);
      }
      comms = make_nccl_local_group(backends, devices, s.timeout_s);
    } else {
      comms = make_inprocess_group(tp, s.timeout_s);
    }
    own_comm_ = std::move(comms[0]);
    comm_ = own_comm_.get();
    for (std::size_t i = 0; i < local_.size(); ++i) {
      std::lock_guard lock(local_[i]->mu);
      local_[i]->comm = std::move(comms[i + 1]);
      local_[i]->has_comm = true;
      local_[i]->cv.notify_all();
    }
    for (const TpMember& m : members_) comm_->check_same_config(config_of(m, seed));
    split_host_threads();
  } catch (...) {
    for (auto& lr : local_) {
      {
        std::lock_guard lock(lr->mu);
        lr->stop = true;
        lr->cv.notify_all();
      }
      lr->thread.join();
    }
    local_.clear();
    throw;
  }
}

int TpRun::busy_threads(bool second_lane) const {
  // A multi-process run's ranks on this machine are processes of their own, as busy as this one.
  const int ranks = leader_ && comm_ != nullptr ? local_ranks(comm_->size())
                                                : static_cast<int>(local_.size()) + 1;
  return ranks * std::max(1, host_threads_) + (second_lane ? ranks : 0);
}

void TpRun::split_host_threads() {
  threads_backend_ = &ws_.front()->backend();
  threads_backend_->set_host_threads(host_threads_);
}

TpRun::~TpRun() {
  try {
    if (leader_) send(Command::end);
  } catch (const std::exception& e) {
    std::cerr << "fusebench: could not release the follower ranks: " << e.what() << "\n";
  }
  for (auto& lr : local_) {
    {
      std::lock_guard lock(lr->mu);
      lr->stop = true;
      lr->cv.notify_all();
    }
    lr->thread.join();
  }
  local_.clear();  // their workspaces and backends go before the communicators they used
  if (threads_backend_ != nullptr) threads_backend_->set_host_threads(0);  // the defaults again
}

void TpRun::post_to_local_ranks(std::size_t member) { post_job(Job{member}); }

void TpRun::post_job(const Job& job) {
  for (auto& lr : local_) {
    std::lock_guard lock(lr->mu);
    if (lr->error) std::rethrow_exception(lr->error);
    lr->posted.push_back(job);
    lr->cv.notify_all();
  }
}

std::vector<double> TpRun::compute_on_every_rank(std::size_t member, int reps,
                                                 measure::DeviceTiming* device,
                                                 double block_timeout_s, bool* host_gaps) {
  Workspace& ws = *ws_.at(member);
  const int tp = members_.at(member).shard.tp;
  const int rank = comm_ != nullptr ? comm_->rank() : 0;
  if (leader_) {  // the followers run theirs (TpRun::follow)
    send(Command::compute, static_cast<std::int32_t>(member));
    send(Command::compute_reps, reps);
    send(Command::compute_block_ms,
         device != nullptr ? std::max(1, static_cast<int>(block_timeout_s * 1e3)) : 0);
    mpi_barrier();
    const double mine = compute_pass(ws, rank, tp, reps, device, block_timeout_s, host_gaps);
    return mpi_allgather_doubles(mine);
  }
  if (local_.empty()) return {compute_pass(ws, rank, tp, reps, device, block_timeout_s, host_gaps)};
  post_job(Job{member, reps, device != nullptr, block_timeout_s});
  start_line_->arrive_and_wait(settings_.timeout_s);
  std::vector<double> out{compute_pass(ws, rank, tp, reps, device, block_timeout_s, host_gaps)};
  wait_local_ranks();
  for (auto& lr : local_) {
    std::lock_guard lock(lr->mu);
    out.push_back(lr->compute_s);
    *host_gaps = *host_gaps || lr->host_gaps;
  }
  return out;
}

std::vector<CollectiveTally> TpRun::tallies() const {
  std::vector<CollectiveTally> out{comm_ != nullptr ? comm_->tally() : CollectiveTally{}};
  for (const auto& lr : local_) out.push_back(lr->comm ? lr->comm->tally() : CollectiveTally{});
  return out;
}

void TpRun::wait_local_ranks() {
  for (auto& lr : local_) {
    std::unique_lock lock(lr->mu);
    lr->cv.wait(lock, [&] { return lr->posted.empty() || lr->error; });
    if (lr->error) std::rethrow_exception(lr->error);
    if (lr->backend) lr->backend->synchronize();
  }
}

void TpRun::region(std::size_t member) {
  Workspace& ws = *ws_.at(member);
#ifdef FUSEBENCH_HAVE_CUDA
  // A graph captured on rank 0 would hold rank 0's collectives while the other ranks ran theirs
  // at once: refuse instead of letting them wait for each other until the timeout.
  if (comm_ != nullptr && !comm_->modelled() && ws.backend().stream() != nullptr) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(static_cast<cudaStream_t>(ws.backend().stream()), &status);
    if (status != cudaStreamCaptureStatusNone) {
      throw std::runtime_error(
          "timing:graph cannot capture the collectives of several ranks (comm:" + kind_ +
          "); use --timing=batch,eager");
    }
  }
#endif
  if (leader_) send(Command::run, static_cast<std::int32_t>(member));
  post_to_local_ranks(member);
  ws.run(comm_);
}

namespace {
// What the communicators counted (Communicator::tally) over `runs` runs beside the plan's bytes
// (`model`, per kind): per run, rank 0's total and per kind, and every local rank's total. A
// modelled communicator moves nothing: its counters say modelled, never measured.
void add_counted_bytes(const std::vector<CollectiveTally>& after,
                       const std::vector<CollectiveTally>& before, int runs,
                       const std::map<CollectiveKind, double>& model, bool modelled,
                       const std::string& comm, TpReport& out) {
  const std::string suffix = modelled ? "_modelled" : "_measured";
  std::vector<double> per_rank;
  for (std::size_t r = 0; r < after.size(); ++r)
    per_rank.push_back(static_cast<double>(after[r].since(before[r]).total_bytes()) / runs);
  const CollectiveTally mine = after.front().since(before.front());
  out.counters["comm_bytes" + suffix] = per_rank.front();
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    if (mine.calls[k] == 0 && model.count(kind) == 0) continue;
    out.counters[std::string(to_string(kind)) + "_bytes" + suffix] =
        static_cast<double>(mine.bytes[k]) / runs;
  }
  if (per_rank.size() > 1) out.fields["comm_bytes" + suffix + "_per_rank"] = per_rank;
  out.fields["comm_bytes_counted"] =
      modelled ? "modelled: the bytes the " + comm +
                     " communicator priced per run (it moves no data), counted call by call "
                     "over " +
                     std::to_string(runs) + " run(s) of rank 0"
               : "measured: the payload bytes the " + comm +
                     " communicator handed its transport per run, counted call by call over " +
                     std::to_string(runs) + " runs on rank 0" +
                     (per_rank.size() > 1 ? " and on every local rank" : "") +
                     "; comm_bytes is the plan's (modelled)";
}

// Every rank's compute pass, which one the pipeline waits for, and how long the others wait.
void add_rank_balance(const std::vector<double>& per_rank,
                      std::map<std::string, double>& counters) {
  const auto slowest = std::max_element(per_rank.begin(), per_rank.end());
  double sum = 0, wait = 0;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    counters["compute_seconds_rank" + std::to_string(r)] = per_rank[r];
    sum += per_rank[r];
    wait += *slowest - per_rank[r];
  }
  const auto n = static_cast<double>(per_rank.size());
  counters["compute_slowest_rank"] = static_cast<double>(slowest - per_rank.begin());
  counters["compute_imbalance"] = sum > 0 ? *slowest / (sum / n) : 1.0;
  counters["compute_wait_fraction"] = *slowest > 0 ? wait / (n * *slowest) : 0.0;
}
}  // namespace

TpReport TpRun::report(std::size_t member, double pipeline_s, const Ceilings* ceilings,
                       measure::DeviceTiming* device, double block_timeout_s) {
  TpReport out;
  nlohmann::json& fields = out.fields;
  auto& counters = out.counters;
  Workspace& ws = *ws_.at(member);
  Backend& backend = ws.backend();
  const Plan& plan = ws.plan();
  const Cost cost = cost_of(plan);
  const int tp = members_.at(member).shard.tp;
  wait_local_ranks();
  backend.synchronize();
  const bool modelled = comm_ != nullptr && comm_->modelled();
  fields["comm"] = kind_;
  fields["comm_time_source"] =
      comm_ == nullptr ? "none (tp=1: no collectives)"
      : modelled       ? "modelled: link model, see link_profile"
                       : "measured: " + comm_->name() + " collectives timed one by one on rank 0";
  if (modelled) {
    fields["link_profile"] = {{"name", settings_.link.name},
                              {"latency_s", settings_.link.latency_s},
                              {"busbw_bytes_per_s", settings_.link.busbw},
                              {"source", settings_.link.source}};
    fields["modelled_note"] =
        "one rank's compute measured; each collective stands in as a delay of its modelled time "
        "(spin kernel on the GPU, busy wait on the CPU), so real_time = measured compute + "
        "modelled comm";
  }

  // The compute alone, on every rank at once (the repetitions sized on this rank).
  SkipCollectives skip(comm_ ? comm_->rank() : 0, tp);
  const int reps = repetitions_for([&] { ws.run(&skip); }, backend);
  bool host_gaps = false;
  const std::vector<double> per_rank =
      compute_on_every_rank(member, reps, device, block_timeout_s, &host_gaps);
  const double compute_s = *std::max_element(per_rank.begin(), per_rank.end());
  // Counters, not a field: every repetition of an entry has its own.
  counters["compute_ranks"] = static_cast<double>(per_rank.size());
  counters["compute_seconds_fastest_rank"] = *std::min_element(per_rank.begin(), per_rank.end());
  if (per_rank.size() > 1) add_rank_balance(per_rank, counters);
  if (host_gaps) {
    fields["compute_seconds_note"] =
        "the blocking kernel timed out before a chunk of runs was enqueued: includes host gaps";
  }

  // Communication per run, by kind; the bytes each rank's communicator counted over the runs.
  std::map<CollectiveKind, double> comm_s, comm_bytes;
  for (const auto& [kind, traffic] : collective_traffic(plan)) comm_bytes[kind] = traffic.bytes;
  const std::vector<CollectiveTally> before = tallies();
  int counted_runs = 0;
  if (modelled) {
    // Call by call, as the stand-in delays ran: overlap's chunks each pay the link's latency.
    for (const Step& step : plan.steps)
      if (const auto call = collective_call(step, plan.dtype))
        comm_s[call->kind] += modelled_seconds(settings_.link, call->kind, call->bytes, tp);
    ws.run(comm_);  // one run for the bytes the communicator prices
    backend.synchronize();
    counted_runs = 1;
  } else if (comm_ != nullptr) {
    TimedCollectives timed(*comm_, backend);
    const int comm_reps = std::min(reps, 50);
    for (int i = 0; i < comm_reps; ++i) {
      if (leader_) send(Command::run, static_cast<std::int32_t>(member));
      post_to_local_ranks(member);
      ws.run(&timed);
    }
    wait_local_ranks();
    backend.synchronize();
    for (const auto& [kind, s] : timed.seconds) comm_s[kind] = s / comm_reps;
    counted_runs = comm_reps;
  }
  if (counted_runs > 0)
    add_counted_bytes(tallies(), before, counted_runs, comm_bytes, modelled, comm_->name(), out);
  double comm_total = 0;
  for (const auto& [kind, s] : comm_s) comm_total += s;
  counters["comm_bytes"] = cost.comm_bytes;
  counters["comm_wire_bytes"] = cost.comm_wire_bytes;
  counters["padded_tokens"] = static_cast<double>(plan.padded_tokens);
  counters["comm_modelled"] = modelled ? 1 : 0;
  if (host_threads_ > 0 && backend.name() == "cpu") fields["cpu_threads_per_rank"] = host_threads_;
  counters["compute_seconds"] = compute_s;
  counters["comm_seconds"] = comm_total;
  counters["total_seconds"] = compute_s + comm_total;
  for (const auto& [kind, bytes] : comm_bytes) {
    const std::string k(to_string(kind));
    const double s = comm_s.count(kind) ? comm_s[kind] : 0;
    counters[k + "_bytes"] = bytes;
    counters[k + "_seconds"] = s;
    counters[k + "_algbw"] = algbw(bytes, s);
    counters[k + "_busbw"] = busbw(kind, bytes, s, tp);
  }

  // Exposed versus hidden communication (docs/tp.md): what the timed pipeline spent beyond its
  // compute, and, for modelled entries, what the plan's lanes predict.
  if (comm_total > 0) {
    // Only a plan with a second lane can hide communication; on one lane the difference is the
    // communication's cost measured another way (a cross-check of comm_seconds, noise included).
    counters["comm_by_difference_seconds"] = pipeline_s - compute_s;
    if (ws.uses_second_lane()) {
      const CommSplit measured = split_communication(pipeline_s, compute_s, comm_total);
      counters["comm_exposed_seconds"] = measured.exposed_s;
      counters["comm_hidden_seconds"] = measured.hidden_s;
      counters["comm_hidden_fraction"] = measured.hidden_fraction;
    }
    if (modelled) {
      const PlanTimeline t = plan_timeline(
          plan, modelled_step_seconds(plan, compute_s, ceilings ? *ceilings : Ceilings{},
                                      settings_.link));
      counters["modelled_pipeline_seconds"] = t.makespan_s;
      counters["modelled_comm_exposed_seconds"] = t.split.exposed_s;
      counters["modelled_comm_hidden_seconds"] = t.split.hidden_s;
      counters["modelled_comm_hidden_fraction"] = t.split.hidden_fraction;
      fields["modelled_pipeline_source"] =
          ceilings ? "compute_seconds shared among the compute steps by their roofline time at "
                     "the measured ceilings; collectives priced by the link model"
                   : "compute_seconds shared equally among the compute steps (no ceilings "
                     "measured); collectives priced by the link model";
    }
  }
  return out;
}

LinkProfile measure_link_profile(Backend& backend, const CommSettings& settings) {
  const bool gpu = backend.name() != "cpu";
  const int ranks = gpu ? std::min(cuda_device_count(), 8) : 2;
  if (ranks < 2 || (gpu && !nccl_built())) {
    throw std::invalid_argument(
        "--link-profile=measured needs 2 or more GPUs with NCCL (this machine: " +
        std::to_string(cuda_device_count()) +
        " GPU(s)); name a profile or give custom:<latency_us>:<busbw_GBps>");
  }
  const DType dtype = gpu ? DType::bf16 : DType::f32;
  const ModelShape probe{"link-probe", 4096, 8 * ranks, 8 * ranks, 128, 4096 * ranks, 1};
  CommSettings s = settings;
  s.requested = "auto";
  s.world = nullptr;
  double t[2] = {0, 0}, bytes[2] = {0, 0};
  const std::int64_t tokens[2] = {1, 1024};  // 8 KB and 8 MB of bf16 (16 KB, 16 MB of fp32)
  for (int i = 0; i < 2; ++i) {
    TpMember f{"allreduce", "sum", shard(probe, ranks), tokens[i], dtype};
    f.comm = resolve_comm(s, backend, f.op, ranks);
    Workspace ws(backend, build_plan(f.op, f.variant, f.shard, f.tokens, f.dtype), 1);
    TpRun run({&ws}, {f}, 1, s);
    for (int w = 0; w < 3; ++w) run.region();  // warm-up (NCCL connections, first touch)
    backend.synchronize();
    const int reps = 20;
    auto timer = backend.make_timer();
    timer->start();
    for (int r = 0; r < reps; ++r) run.region();
    timer->stop();
    t[i] = timer->seconds() / reps;
    bytes[i] =
        static_cast<double>(tokens[i] * probe.hidden) * static_cast<double>(dtype_size(dtype));
  }
  const double f = bus_factor(CollectiveKind::all_reduce, ranks);
  const double slope = (t[1] - t[0]) / (bytes[1] - bytes[0]);  // seconds per byte
  LinkProfile p;
  p.name = "measured";
  p.busbw = slope > 0 ? f / slope : bytes[1] * f / t[1];
  p.latency_s = std::max(0.0, t[0] - bytes[0] * f / p.busbw);
  p.source = "measured here: all-reduce over " + std::to_string(ranks) + " ranks (" +
             (gpu ? "nccl" : "inprocess") + "), " + std::to_string(t[0] * 1e6) + " us at " +
             std::to_string(static_cast<long long>(bytes[0])) + " B and " +
             std::to_string(t[1] * 1e6) + " us at " +
             std::to_string(static_cast<long long>(bytes[1])) +
             " B, fitted to latency + bytes*f/busbw";
  return p;
}

void TpRun::follow(const std::vector<TpMember>& sweep, Backend& backend, std::uint64_t seed,
                   const CommSettings& settings) {
  Communicator& comm = *settings.world;
  std::unique_ptr<measure::DeviceTiming> device;  // made on the first compute pass that wants it
  backend.set_host_threads(host_threads_per_rank(local_ranks(comm.size())));
  try {
    while (true) {
      const auto [cmd, count] = receive();
      if (cmd == Command::quit) return;
      if (cmd != Command::group || count < 1)
        throw std::runtime_error("unexpected command from rank 0");
      // The group's members, in the leader's order; every rank holds all their workspaces.
      std::vector<std::unique_ptr<Workspace>> ws;
      std::vector<const TpMember*> members;
      for (std::int32_t i = 0; i < count; ++i) {
        const auto [c, index] = receive();
        if (c != Command::member || index < 0 || index >= static_cast<std::int32_t>(sweep.size()))
          throw std::runtime_error("unexpected command from rank 0 while opening a group");
        members.push_back(&sweep[static_cast<std::size_t>(index)]);
      }
      for (const TpMember* f : members) {
        ShardShape s = f->shard;
        s.rank = comm.rank();
        ws.push_back(std::make_unique<Workspace>(
            backend, build_plan(f->op, f->variant, s, f->tokens, f->dtype), seed, f->weights));
      }
      for (const TpMember* f : members) comm.check_same_config(config_of(*f, seed));
      while (true) {
        const auto [c, member] = receive();
        if (c == Command::run && member >= 0 && member < count) {
          ws[static_cast<std::size_t>(member)]->run(&comm);
        } else if (c == Command::compute && member >= 0 && member < count) {
          const auto [c_reps, reps] = receive();
          const auto [c_block, block_ms] = receive();
          if (c_reps != Command::compute_reps || c_block != Command::compute_block_ms || reps < 1)
            throw std::runtime_error("unexpected command from rank 0 in a compute pass");
          measure::DeviceTiming* dev = device_timing_for(backend, device, block_ms > 0);
          mpi_barrier();
          bool gaps = false;
          const TpMember& f = *members[static_cast<std::size_t>(member)];
          mpi_allgather_doubles(compute_pass(*ws[static_cast<std::size_t>(member)], comm.rank(),
                                             f.shard.tp, reps, dev, block_ms * 1e-3, &gaps));
        } else if (c == Command::end) {
          break;
        } else {
          throw std::runtime_error("unexpected command from rank 0 inside a group");
        }
      }
    }
  } catch (const std::exception& e) {
    // The ranks are out of step now: end the job rather than let rank 0 wait.
    std::cerr << "fusebench: rank " << comm.rank() << ": " << e.what() << "; ending the job"
              << std::endl;
    std::_Exit(3);
  }
}

void TpRun::release_followers(const CommSettings& settings) {
  if (multi_process(settings) && settings.world->rank() == 0) send(Command::quit);
}

}  // namespace fusebench
