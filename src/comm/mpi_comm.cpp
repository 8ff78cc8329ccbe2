// MPI: CPU collectives for multi-process runs and the bootstrap of NCCL across processes.
#include "fusebench/mpi_comm.hpp"

#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "host_mat.hpp"

#ifdef FUSEBENCH_HAVE_MPI
#include <mpi.h>

#include "watchdog.hpp"
#endif

namespace fusebench {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

#ifndef FUSEBENCH_HAVE_MPI

namespace {
[[noreturn]] void no_mpi() {
  throw std::runtime_error(
      "this build has no MPI (configure with an MPI found, FUSEBENCH_WITH_MPI=ON)");
}
}  // namespace
bool mpi_built() { return false; }
MpiSession::MpiSession(int*, char***) { no_mpi(); }
MpiSession::~MpiSession() = default;
std::unique_ptr<Communicator> make_mpi_communicator(double) { no_mpi(); }
void mpi_broadcast(std::vector<char>&) { no_mpi(); }
int mpi_world_rank() { no_mpi(); }
int mpi_world_size() { no_mpi(); }
std::vector<std::string> mpi_allgather_strings(const std::string&) { no_mpi(); }
std::vector<double> mpi_allgather_doubles(double) { no_mpi(); }
void mpi_barrier() { no_mpi(); }

#else

namespace {

int g_thread_level = MPI_THREAD_SINGLE;

void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw std::runtime_error(std::string(call) + ": " +
                             std::string(text, static_cast<std::size_t>(len)));
  }
}
#define FUSEBENCH_MPI(call) check((call), #call)

// Ends the whole job: a peer that never arrives must not leave the others waiting forever.
void abort_job(const std::string& what, double timeout) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::cerr << "fusebench: rank " << rank << ": " << what << " did not complete within " << timeout
            << " s (FUSEBENCH_COMM_TIMEOUT); aborting the job" << std::endl;
  if (g_thread_level >= MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);  // mpirun ends the other ranks when one exits without MPI_Finalize
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(double timeout_s)
      : timeout_(timeout_s),
        watchdog_(timeout_s, [timeout_s](const std::string& w) { abort_job(w, timeout_s); }) {
    FUSEBENCH_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    FUSEBENCH_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  }
  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeout_seconds() const override { return timeout_; }

  void all_reduce(const MatRef& data) override {
    // Summed in fp32 whatever the dtype (MPI has no bf16), then rounded once.
    std::vector<float> v(static_cast<std::size_t>(data.rows * data.cols));
    for (std::int64_t i = 0; i < data.rows; ++i) {
      for (std::int64_t j = 0; j < data.cols; ++j)
        v[static_cast<std::size_t>(i * data.cols + j)] = load(data, i, j);
    }
    watchdog_.arm("MPI all_reduce of " + std::to_string(v.size()) + " elements");
    const int rc = MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT,
                                 MPI_SUM, MPI_COMM_WORLD);
    watchdog_.disarm();
    FUSEBENCH_MPI(rc);
    count(CollectiveKind::all_reduce, v.size() * sizeof(float));  // fp32 on the wire, any dtype
    for (std::int64_t i = 0; i < data.rows; ++i) {
      for (std::int64_t j = 0; j < data.cols; ++j)
        store(data, i, j, v[static_cast<std::size_t>(i * data.cols + j)]);
    }
  }

  void all_gather(const MatRef& src, const MatRef& dst) override {
    comm::check_gather_shapes(src, dst, size_, "MPI");
    const auto mine = pack(src);
    std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(size_));
    watchdog_.arm("MPI all_gather of " + std::to_string(all.size()) + " bytes");
    const int rc = MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                                 static_cast<int>(mine.size()), MPI_BYTE, MPI_COMM_WORLD);
    watchdog_.disarm();
    FUSEBENCH_MPI(rc);
    count(CollectiveKind::all_gather, all.size());
    for (int r = 0; r < size_; ++r)
      unpack(all.data() + mine.size() * static_cast<std::size_t>(r),
             comm::gather_block(dst, src, r));
  }

  void reduce_scatter(const MatRef& src, const MatRef& dst) override {
    check_reduce_scatter_shapes(src, dst, size_, "MPI");
    // Summed in fp32 whatever the dtype, as all_reduce.
    std::vector<float> in(static_cast<std::size_t>(src.rows * src.cols));
    for (std::int64_t i = 0; i < src.rows; ++i) {
      for (std::int64_t j = 0; j < src.cols; ++j)
        in[static_cast<std::size_t>(i * src.cols + j)] = load(src, i, j);
    }
    std::vector<float> out(static_cast<std::size_t>(dst.rows * dst.cols));
    watchdog_.arm("MPI reduce_scatter of " + std::to_string(in.size()) + " elements");
    const int rc = MPI_Reduce_scatter_block(in.data(), out.data(), static_cast<int>(out.size()),
                                            MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    watchdog_.disarm();
    FUSEBENCH_MPI(rc);
    count(CollectiveKind::reduce_scatter, in.size() * sizeof(float));  // fp32, any dtype
    for (std::int64_t i = 0; i < dst.rows; ++i) {
      for (std::int64_t j = 0; j < dst.cols; ++j)
        store(dst, i, j, out[static_cast<std::size_t>(i * dst.cols + j)]);
    }
  }

  void all_gather_rows(const MatRef& src, const MatRef& dst) override {
    check_gather_rows_shapes(src, dst, size_, "MPI");
    const int bytes =
        static_cast<int>(static_cast<std::size_t>(src.rows * src.cols) * dtype_size(src.dtype));
    watchdog_.arm("MPI all_gather_rows of " + std::to_string(bytes * size_) + " bytes");
    // In place when src is this rank's block of dst (MPI forbids aliased buffers otherwise).
    const bool in_place =
        src.data == static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(bytes) * rank_;
    const int rc = MPI_Allgather(in_place ? MPI_IN_PLACE : src.data, bytes, MPI_BYTE, dst.data,
                                 bytes, MPI_BYTE, MPI_COMM_WORLD);
    watchdog_.disarm();
    FUSEBENCH_MPI(rc);
    count(CollectiveKind::all_gather,
          static_cast<std::size_t>(bytes) * static_cast<std::size_t>(size_));
  }

  void all_to_all_rows(const MatRef& src, const std::vector<std::int64_t>& send_rows,
                       const MatRef& dst, const std::vector<std::int64_t>& recv_rows) override {
    const std::int64_t sent = check_all_to_all_shapes(src, send_rows, dst, recv_rows, size_, "MPI");
    const std::int64_t row_bytes = src.cols * static_cast<std::int64_t>(dtype_size(src.dtype));
    // MPI_Alltoallv in bytes (MPI has no bf16); counts and offsets by rank order.
    std::vector<int> send_counts, send_offsets, recv_counts, recv_offsets;
    std::int64_t send_at = 0, recv_at = 0;
    for (int r = 0; r < size_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      send_counts.push_back(static_cast<int>(send_rows[i] * row_bytes));
      send_offsets.push_back(static_cast<int>(send_at * row_bytes));
      recv_counts.push_back(static_cast<int>(recv_rows[i] * row_bytes));
      recv_offsets.push_back(static_cast<int>(recv_at * row_bytes));
      send_at += send_rows[i];
      recv_at += recv_rows[i];
    }
    watchdog_.arm("MPI all_to_all_rows of " + std::to_string(sent * row_bytes) + " bytes");
    const int rc =
        MPI_Alltoallv(src.data, send_counts.data(), send_offsets.data(), MPI_BYTE, dst.data,
                      recv_counts.data(), recv_offsets.data(), MPI_BYTE, MPI_COMM_WORLD);
    watchdog_.disarm();
    FUSEBENCH_MPI(rc);
    count(CollectiveKind::all_to_all, static_cast<std::size_t>(sent * row_bytes));
  }

  void check_same_config(const std::string& config) override {
    const unsigned long long mine = config_hash(config);
    std::vector<unsigned long long> all(static_cast<std::size_t>(size_));
    watchdog_.arm("MPI configuration check");
    const int rc = MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1,
                                 MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    watchdog_.disarm();
    FUSEBENCH_MPI(rc);
    require_same_config(all, config);
  }

 private:
  double timeout_;
  comm::Watchdog watchdog_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool mpi_built() { return true; }

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    FUSEBENCH_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &g_thread_level));
  FUSEBENCH_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  FUSEBENCH_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_Comm node;
  FUSEBENCH_MPI(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s) {
  return std::make_unique<MpiCommunicator>(timeout_s);
}

int mpi_world_rank() {
  int rank = 0;
  FUSEBENCH_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int mpi_world_size() {
  int size = 1;
  FUSEBENCH_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

void mpi_broadcast(std::vector<char>& bytes) {
  FUSEBENCH_MPI(
      MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD));
}

std::vector<double> mpi_allgather_doubles(double value) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<double> out(static_cast<std::size_t>(size));
  FUSEBENCH_MPI(MPI_Allgather(&value, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD));
  return out;
}

void mpi_barrier() { FUSEBENCH_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

std::vector<std::string> mpi_allgather_strings(const std::string& text) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int mine = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  FUSEBENCH_MPI(MPI_Allgather(&mine, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<std::size_t>(r)] = total;
    total += lens[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  FUSEBENCH_MPI(MPI_Allgatherv(text.data(), mine, MPI_CHAR, all.data(), lens.data(), offsets.data(),
                               MPI_CHAR, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) {
    out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                             static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
  }
  return out;
}

#endif

}  // namespace fusebench
