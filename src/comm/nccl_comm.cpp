// NCCL communicators: single process over several GPUs, or one process per GPU bootstrapped by
// MPI. Blocking communicators (a call returns once its kernel is enqueued: no host wait in the
// timed path); a monitor thread (collective_monitor.hpp) aborts on timeout or async error.
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
std::unique_ptr<Communicator> make_nccl_mpi_communicator(Backend&, double) { no_nccl(); }
}  // namespace fusebench

#else

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <iostream>
#include <mutex>

#include "collective_monitor.hpp"
#include "fusebench/mpi_comm.hpp"
#include "gather_columns.hpp"
#include "watchdog.hpp"

namespace fusebench {
namespace {

void check_cuda(cudaError_t err, const char* call) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(err));
}
#define NCCLCOMM_CUDA(call) check_cuda((call), #call)

void check_nccl(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess) {
    const char* last = ncclGetLastError(nullptr);
    throw std::runtime_error(std::string(call) + ": " + ncclGetErrorString(rc) +
                             (last && *last ? std::string(" (") + last + ")" : ""));
  }
}

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

// Blocking: every call returns once enqueued (or failed), on the calling thread, without the
// helper thread and ncclInProgress of nonblocking mode, whose completion poll put a host floor
// under every timed collective. Timeouts stay with the monitor (ncclCommAbort).
ncclConfig_t blocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  return config;
}

// Makes a device current for a scope, restoring the caller's (a TP rank's communicator may be
// used or destroyed from a thread whose current device is another rank's).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// Closes this thread's NCCL group on every way out of the scope: an exception between
// ncclGroupStart and ncclGroupEnd would otherwise leave the group open, and the thread's next
// NCCL call would be swallowed into it.
class GroupGuard {
 public:
  GroupGuard() {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    open_ = true;
  }
  ncclResult_t end() {
    open_ = false;
    return ncclGroupEnd();
  }
  ~GroupGuard() {
    if (open_) ncclGroupEnd();
  }
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;

 private:
  bool open_ = false;
};

// An init that never completes (a peer that never starts) ends the process with a message: a
// blocking init cannot be abandoned safely, and nothing can run without it.
comm::Watchdog init_watchdog(double timeout_s) {
  return comm::Watchdog(timeout_s, [timeout_s](const std::string& what) {
    std::cerr << "fusebench: " << what << " did not complete within " << timeout_s
              << " s (FUSEBENCH_COMM_TIMEOUT); ending the process" << std::endl;
    std::_Exit(3);
  });
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device, Backend& backend,
                   double timeout_s)
      : comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        backend_(backend),
        timeout_(timeout_s) {
    const DeviceScope scope(device_);
    try {
      // The configuration check's buffers, allocated once: device words, and pinned host words
      // (an async copy from pageable memory is staged and can run before the stream is ready).
      const std::size_t words = sizeof(unsigned long long) * static_cast<std::size_t>(size_ + 1);
      NCCLCOMM_CUDA(cudaMalloc(&config_dev_, words));
      NCCLCOMM_CUDA(cudaMallocHost(&config_host_, words));
      monitor_ = std::make_unique<comm::CollectiveMonitor>("NCCL rank " + std::to_string(rank_),
                                                           timeout_, hooks());
    } catch (...) {
      cudaFree(config_dev_);
      cudaFreeHost(config_host_);
      ncclCommAbort(comm_);  // the destructor does not run for a half-built object
      throw;
    }
  }

  ~NcclCommunicator() override {
    const DeviceScope scope(device_);
    // Drain while the monitor still runs: a collective stuck on a dead peer is then aborted
    // after the timeout instead of hanging this synchronisation forever.
    try {
      backend_.synchronize();
    } catch (const std::exception& e) {
      std::cerr << "fusebench: NCCL rank " << rank_ << " teardown: " << e.what() << "\n";
    }
    if (!monitor_->aborted()) {
      try {  // blocking finalize, watched: a peer gone meanwhile makes the monitor abort it
        monitor_->call_unmarked("finalize", [&] { return text(ncclCommFinalize(comm_)); });
      } catch (const std::exception& e) {
        std::cerr << "fusebench: " << e.what() << "\n";
      }
    }
    monitor_->stop();
    if (!monitor_->aborted()) {
      if (ncclCommDestroy(comm_) != ncclSuccess) ncclCommAbort(comm_);
    }  // else ncclCommAbort already freed it
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    if (scratch_) cudaFree(scratch_);
    cudaFree(config_dev_);
    cudaFreeHost(config_host_);
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeout_seconds() const override { return timeout_; }

  void all_reduce(const MatRef& data) override {
    require_contiguous(data, "all_reduce");
    const auto count = static_cast<std::size_t>(data.rows * data.cols);
    call("all_reduce", [&](cudaStream_t s) {
      return ncclAllReduce(data.data, data.data, count, nccl_type(data.dtype), ncclSum, comm_, s);
    });
    count_bytes(CollectiveKind::all_reduce, count * dtype_size(data.dtype));
  }

  void all_gather(const MatRef& src, const MatRef& dst) override {
    require_contiguous(src, "all_gather");
    if (dst.rows != src.rows || dst.cols != src.cols * size_)
      throw std::invalid_argument("NCCL all_gather: dst shape");
    const auto count = static_cast<std::size_t>(src.rows * src.cols);
    const std::size_t elem = dtype_size(src.dtype);
    if (src.rows == 1 && dst.ld == dst.cols) {  // [n][1][c] is [1][n*c]: straight into dst
      call("all_gather", [&](cudaStream_t s) {
        return ncclAllGather(src.data, dst.data, count, nccl_type(src.dtype), comm_, s);
      });
      count_bytes(CollectiveKind::all_gather, count * elem * static_cast<std::size_t>(size_));
      return;
    }
    // NCCL concatenates rank-major ([n][M][c]); one kernel lays the blocks out as columns.
    void* stage = scratch(count * elem * static_cast<std::size_t>(size_));
    call("all_gather", [&](cudaStream_t s) {
      return ncclAllGather(src.data, stage, count, nccl_type(src.dtype), comm_, s);
    });
    count_bytes(CollectiveKind::all_gather, count * elem * static_cast<std::size_t>(size_));
    NCCLCOMM_CUDA(comm::launch_gather_columns(stage, dst.data, src.rows, src.cols, dst.ld, size_,
                                              elem, stream()));
  }

  // Rows are contiguous, so rank r's block of the rank-major input is its rows: one call each,
  // no staging (in place when dst is this rank's rows of src, or src its rows of dst).
  void reduce_scatter(const MatRef& src, const MatRef& dst) override {
    check_reduce_scatter_shapes(src, dst, size_, "NCCL");
    const auto count = static_cast<std::size_t>(dst.rows * dst.cols);
    call("reduce_scatter", [&](cudaStream_t s) {
      return ncclReduceScatter(src.data, dst.data, count, nccl_type(src.dtype), ncclSum, comm_, s);
    });
    count_bytes(CollectiveKind::reduce_scatter,
                count * dtype_size(src.dtype) * static_cast<std::size_t>(size_));
  }

  void all_gather_rows(const MatRef& src, const MatRef& dst) override {
    check_gather_rows_shapes(src, dst, size_, "NCCL");
    const auto count = static_cast<std::size_t>(src.rows * src.cols);
    call("all_gather_rows", [&](cudaStream_t s) {
      return ncclAllGather(src.data, dst.data, count, nccl_type(src.dtype), comm_, s);
    });
    count_bytes(CollectiveKind::all_gather,
                count * dtype_size(src.dtype) * static_cast<std::size_t>(size_));
  }

  // Grouped ncclSend/ncclRecv, one pair per peer with rows to move (nccl-tests' alltoall), in
  // bytes: no staging, each peer's rows contiguous in src and dst.
  void all_to_all_rows(const MatRef& src, const std::vector<std::int64_t>& send_rows,
                       const MatRef& dst, const std::vector<std::int64_t>& recv_rows) override {
    check_all_to_all_shapes(src, send_rows, dst, recv_rows, size_, "NCCL");
    const std::size_t row_bytes = static_cast<std::size_t>(src.cols) * dtype_size(src.dtype);
    std::size_t sent = 0;  // bytes handed to ncclSend
    call("all_to_all_rows", [&](cudaStream_t s) {
      ncclResult_t rc = ncclGroupStart();
      std::size_t send_at = 0, recv_at = 0;
      for (int r = 0; r < size_ && rc == ncclSuccess; ++r) {
        const auto i = static_cast<std::size_t>(r);
        const std::size_t out = static_cast<std::size_t>(send_rows[i]) * row_bytes,
                          in = static_cast<std::size_t>(recv_rows[i]) * row_bytes;
        if (out > 0)
          rc = ncclSend(static_cast<const char*>(src.data) + send_at, out, ncclUint8, r, comm_, s);
        if (rc == ncclSuccess && in > 0)
          rc = ncclRecv(static_cast<char*>(dst.data) + recv_at, in, ncclUint8, r, comm_, s);
        send_at += out;
        recv_at += in;
      }
      const ncclResult_t end = ncclGroupEnd();  // closes the group on every path
      sent = send_at;
      return rc != ncclSuccess ? rc : end;
    });
    count_bytes(CollectiveKind::all_to_all, sent);
  }

  // Only the column all-gather stages (its rank-major result is laid out as columns).
  void reserve(std::size_t max_message_bytes) override { scratch(max_message_bytes); }

  void check_same_config(const std::string& config) override {
    const DeviceScope scope(device_);
    auto* dev = static_cast<unsigned long long*>(config_dev_);
    auto* host = static_cast<unsigned long long*>(config_host_);
    // Nothing of this rank may still be in flight on the stream the words travel on.
    backend_.synchronize();
    host[size_] = config_hash(config);
    NCCLCOMM_CUDA(cudaMemcpyAsync(dev + size_, host + size_, sizeof(*host), cudaMemcpyHostToDevice,
                                  stream()));
    call("configuration check",
         [&](cudaStream_t s) { return ncclAllGather(dev + size_, dev, 1, ncclUint64, comm_, s); });
    NCCLCOMM_CUDA(cudaMemcpyAsync(host, dev, sizeof(*host) * static_cast<std::size_t>(size_),
                                  cudaMemcpyDeviceToHost, stream()));
    const cudaError_t err = cudaStreamSynchronize(stream());  // the monitor aborts a hang
    monitor_->throw_if_failed();
    NCCLCOMM_CUDA(err);
    require_same_config(std::vector<unsigned long long>(host, host + size_), config);
  }

 private:
  static std::string text(ncclResult_t rc) {
    if (rc == ncclSuccess) return {};
    const char* last = ncclGetLastError(nullptr);
    return std::string(ncclGetErrorString(rc)) +
           (last && *last ? std::string(" (") + last + ")" : "");
  }

  static void require_contiguous(const MatRef& m, const char* what) {
    if (m.rows > 1 && m.ld != m.cols) {
      throw std::invalid_argument(std::string("NCCL ") + what +
                                  ": the buffer must be contiguous (ld == cols)");
    }
  }

  // The payload handed to NCCL by one call (Communicator::count; `count` is the element count
  // of the calls above).
  void count_bytes(CollectiveKind kind, std::size_t bytes) { Communicator::count(kind, bytes); }

  // The current lane's stream of the backend (a plan's communication lane, docs/tp.md).
  cudaStream_t stream() const { return static_cast<cudaStream_t>(backend_.stream()); }

  template <class Issue>
  void call(const char* what, Issue&& issue) {
    const cudaStream_t s = stream();
    issuing_stream_ = s;
    monitor_->call(what, [&] { return text(issue(s)); });
  }

  comm::CollectiveMonitor::Hooks hooks() {
    comm::CollectiveMonitor::Hooks h;
    h.mark = [this]() -> void* {
      cudaEvent_t ev = nullptr;
      {
        std::lock_guard lock(events_mu_);
        if (!free_events_.empty()) {
          ev = free_events_.back();
          free_events_.pop_back();
        }
      }
      if (ev == nullptr) NCCLCOMM_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
      NCCLCOMM_CUDA(cudaEventRecord(ev, issuing_stream_));
      return ev;
    };
    h.query = [](void* marker, std::string* error) {
      const cudaError_t q = cudaEventQuery(static_cast<cudaEvent_t>(marker));
      if (q == cudaSuccess) return comm::Completion::done;
      if (q == cudaErrorNotReady) return comm::Completion::pending;
      *error = cudaGetErrorString(q);
      return comm::Completion::failed;
    };
    h.release = [this](void* marker) {
      std::lock_guard lock(events_mu_);
      free_events_.push_back(static_cast<cudaEvent_t>(marker));
    };
    h.async_error = [this]() -> std::string {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess)
        return "ncclCommGetAsyncError failed";
      return state == ncclSuccess || state == ncclInProgress ? std::string()
                                                             : ncclGetErrorString(state);
    };
    h.abort = [this] { ncclCommAbort(comm_); };  // makes the stuck kernels and calls return
    h.on_thread_start = [this] { cudaSetDevice(device_); };
    return h;
  }

  // Grows only (freeing would synchronise the device); reserve() sizes it before the runs.
  void* scratch(std::size_t bytes) {
    if (bytes > scratch_bytes_) {
      const DeviceScope scope(device_);
      if (scratch_) cudaFree(scratch_);
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      NCCLCOMM_CUDA(cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    return scratch_;
  }

  ncclComm_t comm_;
  int rank_, size_, device_;
  Backend& backend_;
  double timeout_;
  cudaStream_t issuing_stream_ = nullptr;  // the stream of the call being issued (mark hook)
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  void* config_dev_ = nullptr;
  void* config_host_ = nullptr;
  std::mutex events_mu_;
  std::vector<cudaEvent_t> free_events_;
  std::unique_ptr<comm::CollectiveMonitor> monitor_;  // last: its thread uses the members above
};

}  // namespace

bool nccl_built() { return true; }

std::vector<std::unique_ptr<Communicator>> make_nccl_local_group(
    const std::vector<Backend*>& backends, const std::vector<int>& devices, double timeout_s) {
  const int n = static_cast<int>(devices.size());
  if (n < 1 || backends.size() != devices.size())
    throw std::invalid_argument("NCCL local group: one backend per device");
  int caller_device = 0;
  NCCLCOMM_CUDA(cudaGetDevice(&caller_device));
  const DeviceScope restore(caller_device);  // init switches devices
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n), nullptr);
  ncclConfig_t config = blocking_config();
  comm::Watchdog dog = init_watchdog(timeout_s);
  // Armed before the group opens: the guard's ncclGroupEnd on an error path runs the inits
  // queued so far, which then wait for the ranks that were never queued.
  dog.arm("NCCL init of " + std::to_string(n) + " ranks in this process");
  try {
    GroupGuard group;  // one group: the ranks' inits wait for each other inside ncclGroupEnd
    for (int i = 0; i < n; ++i) {
      NCCLCOMM_CUDA(cudaSetDevice(devices[static_cast<std::size_t>(i)]));
      check_nccl(ncclCommInitRankConfig(&comms[static_cast<std::size_t>(i)], n, id, i, &config),
                 "ncclCommInitRankConfig");
    }
    const ncclResult_t rc = group.end();
    dog.disarm();
    check_nccl(rc, "ncclGroupEnd (init)");
  } catch (...) {
    dog.disarm();
    // NCCL clears the handles of inits it gave up on; the rest are aborted (not destroyed: a
    // rank whose peers failed would wait for them in ncclCommDestroy).
    for (ncclComm_t c : comms) {
      if (c != nullptr) ncclCommAbort(c);
    }
    throw;
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<NcclCommunicator>(
        comms[static_cast<std::size_t>(i)], i, n, devices[static_cast<std::size_t>(i)],
        *backends[static_cast<std::size_t>(i)], timeout_s));
  }
  return out;
}

std::unique_ptr<Communicator> make_nccl_mpi_communicator(Backend& backend, double timeout_s) {
  const int rank = mpi_world_rank(), size = mpi_world_size();
  const int device = backend.device();
  if (device < 0) throw std::invalid_argument("NCCL communicator: the backend has no CUDA device");
  std::vector<char> id_bytes(sizeof(ncclUniqueId));
  ncclUniqueId id;
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::memcpy(id_bytes.data(), &id, sizeof(id));
  }
  mpi_broadcast(id_bytes);  // MPI only bootstraps: the collectives are NCCL's
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  NCCLCOMM_CUDA(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  ncclConfig_t config = blocking_config();
  comm::Watchdog dog = init_watchdog(timeout_s);
  dog.arm("NCCL init of rank " + std::to_string(rank) + " of " + std::to_string(size));
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  dog.disarm();
  if (rc != ncclSuccess) {
    if (comm != nullptr) ncclCommAbort(comm);
    check_nccl(rc, "ncclCommInitRankConfig");
  }
  return std::make_unique<NcclCommunicator>(comm, rank, size, device, backend, timeout_s);
}

}  // namespace fusebench

#endif
