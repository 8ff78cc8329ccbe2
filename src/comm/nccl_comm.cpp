// NCCL communicators: single process over several GPUs, or one process per GPU bootstrapped by
// MPI. Nonblocking init and calls, a monitor thread that aborts on timeout or async error.
#include "fusebench/nccl_comm.hpp"

#include <stdexcept>
#include <string>

#ifndef FUSEBENCH_HAVE_NCCL

namespace fusebench {
namespace {
[[noreturn]] void no_nccl() {
  throw std::runtime_error(
      "this build has no NCCL (needs the CUDA toolkit and nccl.h/libnccl; set NCCL_ROOT)");
}
}  // namespace
bool nccl_built() { return false; }
std::vector<std::unique_ptr<Communicator>> make_nccl_local_group(const std::vector<Backend*>&,
                                                                 const std::vector<int>&, double) {
  no_nccl();
}
std::unique_ptr<Communicator> make_nccl_mpi_communicator(Backend&, int, double) { no_nccl(); }
}  // namespace fusebench

#else

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include "fusebench/mpi_comm.hpp"
#include "gather_columns.hpp"

namespace fusebench {
namespace {

using Clock = std::chrono::steady_clock;

void check_cuda(cudaError_t err, const char* call) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(err));
}
#define NCCLCOMM_CUDA(call) check_cuda((call), #call)

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::f32:
      return ncclFloat32;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
  }
  return ncclFloat32;
}

// Waits until a nonblocking communicator has finished its pending call; aborts it on timeout.
void wait_ready(ncclComm_t comm, double timeout_s, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  ncclResult_t state = ncclInProgress;
  while (true) {
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) state = rc;
    if (state != ncclInProgress) break;
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      throw std::runtime_error("NCCL " + what + " did not complete within " +
                               std::to_string(timeout_s) +
                               " s (FUSEBENCH_COMM_TIMEOUT); communicator aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (state != ncclSuccess) {
    const char* last = ncclGetLastError(comm);
    ncclCommAbort(comm);
    throw std::runtime_error("NCCL " + what + ": " + ncclGetErrorString(state) +
                             (last && *last ? std::string(" (") + last + ")" : "") +
                             "; communicator aborted");
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device, void* stream, double timeout_s)
      : comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        stream_(static_cast<cudaStream_t>(stream)),
        timeout_(timeout_s),
        monitor_([this] { monitor(); }) {}

  ~NcclCommunicator() override {
    // The destructor may run on another rank's thread (the owner of the TP run): restore its
    // device, or that thread's later work would land on this communicator's GPU.
    int caller_device = -1;
    cudaGetDevice(&caller_device);
    cudaSetDevice(device_);
    // Drain the stream while the monitor still runs: a collective stuck on a dead peer is then
    // aborted after the timeout instead of hanging this synchronisation forever.
    cudaStreamSynchronize(stream_);
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    monitor_.join();
    if (aborted_) {
      // ncclCommAbort already freed it.
    } else {
      ncclCommFinalize(comm_);
      ncclResult_t state = ncclInProgress;
      const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_);
      while (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclInProgress &&
             Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (state == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
    }
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    for (auto& p : pending_) cudaEventDestroy(p.event);
    if (scratch_) cudaFree(scratch_);
    if (caller_device >= 0) cudaSetDevice(caller_device);
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeout_seconds() const override { return timeout_; }

  void all_reduce(const MatRef& data) override {
    require_contiguous(data, "all_reduce");
    const auto count = static_cast<std::size_t>(data.rows * data.cols);
    call(
        [&] {
          return ncclAllReduce(data.data, data.data, count, nccl_type(data.dtype), ncclSum, comm_,
                               stream_);
        },
        "all_reduce");
  }

  void all_gather(const MatRef& src, const MatRef& dst) override {
    require_contiguous(src, "all_gather");
    if (dst.rows != src.rows || dst.cols != src.cols * size_)
      throw std::invalid_argument("NCCL all_gather: dst shape");
    const auto count = static_cast<std::size_t>(src.rows * src.cols);
    const std::size_t elem = dtype_size(src.dtype);
    if (src.rows == 1 && dst.ld == dst.cols) {  // [n][1][c] is [1][n*c]: straight into dst
      call(
          [&] {
            return ncclAllGather(src.data, dst.data, count, nccl_type(src.dtype), comm_, stream_);
          },
          "all_gather");
      return;
    }
    // NCCL concatenates rank-major ([n][M][c]); one kernel lays the blocks out as columns.
    void* stage = scratch(count * elem * static_cast<std::size_t>(size_));
    call(
        [&] { return ncclAllGather(src.data, stage, count, nccl_type(src.dtype), comm_, stream_); },
        "all_gather");
    NCCLCOMM_CUDA(comm::launch_gather_columns(stage, dst.data, src.rows, src.cols, dst.ld, size_,
                                              elem, stream_));
  }

  void check_same_config(const std::string& config) override {
    const unsigned long long mine = config_hash(config);
    auto* dev = static_cast<unsigned long long*>(
        scratch(sizeof(mine) * static_cast<std::size_t>(size_ + 1)));
    NCCLCOMM_CUDA(
        cudaMemcpyAsync(dev + size_, &mine, sizeof(mine), cudaMemcpyHostToDevice, stream_));
    call([&] { return ncclAllGather(dev + size_, dev, 1, ncclUint64, comm_, stream_); },
         "configuration check");
    std::vector<unsigned long long> all(static_cast<std::size_t>(size_));
    NCCLCOMM_CUDA(cudaMemcpyAsync(all.data(), dev, sizeof(mine) * all.size(),
                                  cudaMemcpyDeviceToHost, stream_));
    const cudaError_t err = cudaStreamSynchronize(stream_);
    throw_if_failed();
    NCCLCOMM_CUDA(err);
    require_same_config(all, config);
  }

 private:
  struct Pending {
    cudaEvent_t event;
    Clock::time_point issued;
    std::string what;
  };

  static void require_contiguous(const MatRef& m, const char* what) {
    if (m.rows > 1 && m.ld != m.cols) {
      throw std::invalid_argument(std::string("NCCL ") + what +
                                  ": the buffer must be contiguous (ld == cols)");
    }
  }

  void throw_if_failed() {
    std::lock_guard lock(mu_);
    if (!failure_.empty()) throw std::runtime_error(failure_);
  }

  // Issues the call, checks it, then hands an event after it to the monitor. The issue and the
  // polling run under mu_ and only when the monitor has not aborted comm_: the monitor aborts
  // (frees) comm_ from its own thread, and an NCCL call on it afterwards or meanwhile would be a
  // use after free. A timeout here marks the communicator aborted so neither the monitor nor the
  // destructor touch comm_ again.
  template <class Issue>
  void call(Issue&& issue, const char* what) {
    {
      std::lock_guard lock(mu_);
      if (!failure_.empty()) throw std::runtime_error(failure_);
      const ncclResult_t rc = issue();
      if (rc == ncclInProgress) {
        try {
          wait_ready(comm_, timeout_, what);
        } catch (const std::exception& e) {
          failure_ = e.what();
          aborted_ = true;  // wait_ready aborted comm_
          for (auto& p : pending_) free_events_.push_back(p.event);
          pending_.clear();
          throw;
        }
      } else if (rc != ncclSuccess) {
        throw std::runtime_error(std::string("NCCL ") + what + ": " + ncclGetErrorString(rc));
      }
    }
    cudaEvent_t ev{};
    {
      std::lock_guard lock(mu_);
      if (!free_events_.empty()) {
        ev = free_events_.back();
        free_events_.pop_back();
      }
    }
    if (ev == nullptr) NCCLCOMM_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    NCCLCOMM_CUDA(cudaEventRecord(ev, stream_));
    std::lock_guard lock(mu_);
    pending_.push_back({ev, Clock::now(), what});
    cv_.notify_all();
  }

  void* scratch(std::size_t bytes) {
    if (bytes > scratch_bytes_) {
      if (scratch_) cudaFree(scratch_);
      scratch_ = nullptr;
      NCCLCOMM_CUDA(cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    return scratch_;
  }

  // Retires completed collectives; aborts the communicator when the oldest one is overdue or
  // NCCL reports an asynchronous error (a kernel stuck waiting for a dead peer would otherwise
  // hang the next stream synchronisation forever).
  void monitor() {
    cudaSetDevice(device_);
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (pending_.empty()) {
        cv_.wait(lock);
        continue;
      }
      Pending& p = pending_.front();
      const cudaError_t q = cudaEventQuery(p.event);
      if (q == cudaSuccess) {
        free_events_.push_back(p.event);
        pending_.pop_front();
        continue;
      }
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      const bool overdue = Clock::now() - p.issued > std::chrono::duration<double>(timeout_);
      if (q != cudaErrorNotReady || (state != ncclSuccess && state != ncclInProgress) || overdue) {
        failure_ = "NCCL " + p.what + " on rank " + std::to_string(rank_) + ": " +
                   (overdue ? "not complete after " + std::to_string(timeout_) +
                                  " s (FUSEBENCH_COMM_TIMEOUT)"
                            : std::string(state != ncclSuccess ? ncclGetErrorString(state)
                                                               : cudaGetErrorString(q))) +
                   "; communicator aborted";
        std::cerr << "fusebench: " << failure_ << std::endl;
        aborted_ = true;
        ncclCommAbort(comm_);  // makes the stuck kernels return
        for (auto& e : pending_) free_events_.push_back(e.event);
        pending_.clear();
        continue;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(2));
    }
  }

  ncclComm_t comm_;
  int rank_, size_, device_;
  cudaStream_t stream_;
  double timeout_;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
  std::string failure_;
  std::atomic<bool> aborted_{false};
  bool stop_ = false;
  std::thread monitor_;  // last: starts after the members it reads
};

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

void check_nccl(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess && rc != ncclInProgress)
    throw std::runtime_error(std::string(call) + ": " + ncclGetErrorString(rc));
}

}  // namespace

bool nccl_built() { return true; }

std::vector<std::unique_ptr<Communicator>> make_nccl_local_group(
    const std::vector<Backend*>& backends, const std::vector<int>& devices, double timeout_s) {
  const int n = static_cast<int>(devices.size());
  if (n < 1 || backends.size() != devices.size())
    throw std::invalid_argument("NCCL local group: one backend per device");
  int caller_device = 0;
  NCCLCOMM_CUDA(cudaGetDevice(&caller_device));  // restored below: init switches devices
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
  ncclConfig_t config = nonblocking_config();
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int i = 0; i < n; ++i) {
    NCCLCOMM_CUDA(cudaSetDevice(devices[static_cast<std::size_t>(i)]));
    check_nccl(ncclCommInitRankConfig(&comms[static_cast<std::size_t>(i)], n, id, i, &config),
               "ncclCommInitRankConfig");
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  NCCLCOMM_CUDA(cudaSetDevice(caller_device));
  for (int i = 0; i < n; ++i) {
    try {
      wait_ready(comms[static_cast<std::size_t>(i)], timeout_s,
                 "init of rank " + std::to_string(i));
    } catch (...) {
      // wait_ready aborted rank i; abort the others too, or their init/proxy threads stay
      // behind waiting for it.
      for (int j = 0; j < n; ++j) {
        if (j != i) ncclCommAbort(comms[static_cast<std::size_t>(j)]);
      }
      throw;
    }
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<NcclCommunicator>(
        comms[static_cast<std::size_t>(i)], i, n, devices[static_cast<std::size_t>(i)],
        backends[static_cast<std::size_t>(i)]->stream(), timeout_s));
  }
  return out;
}

std::unique_ptr<Communicator> make_nccl_mpi_communicator(Backend& backend, int device,
                                                         double timeout_s) {
  const int rank = mpi_world_rank(), size = mpi_world_size();
  std::vector<char> id_bytes(sizeof(ncclUniqueId));
  ncclUniqueId id;
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::memcpy(id_bytes.data(), &id, sizeof(id));
  }
  mpi_broadcast(id_bytes);  // MPI only bootstraps: the collectives are NCCL's
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  NCCLCOMM_CUDA(cudaSetDevice(device));
  ncclComm_t comm{};
  ncclConfig_t config = nonblocking_config();
  check_nccl(ncclCommInitRankConfig(&comm, size, id, rank, &config), "ncclCommInitRankConfig");
  wait_ready(comm, timeout_s, "init of rank " + std::to_string(rank));
  return std::make_unique<NcclCommunicator>(comm, rank, size, device, backend.stream(), timeout_s);
}

}  // namespace fusebench

#endif
