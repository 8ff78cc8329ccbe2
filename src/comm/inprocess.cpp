// In-process communicator: ranks are threads of one process sharing host memory. Collectives
// are rendezvous on a barrier (with a timeout, so a missing rank is an error, never a hang);
// every rank sums in the same rank order, so all ranks get bit-identical results.
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include "fusebench/communicator.hpp"
#include "host_mat.hpp"

namespace fusebench {

double default_comm_timeout() {
  const char* env = std::getenv("FUSEBENCH_COMM_TIMEOUT");
  if (env == nullptr) return 120.0;
  // Strict: "abc" or "3s" must not silently become the default (or 3).
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !std::isfinite(v) || !(v > 0)) {
    throw std::invalid_argument("FUSEBENCH_COMM_TIMEOUT=" + std::string(env) +
                                " is invalid (seconds > 0, e.g. 120; unset for the default 120)");
  }
  return v;
}

std::uint64_t config_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::int64_t CollectiveTally::total_bytes() const {
  std::int64_t n = 0;
  for (const auto b : bytes) n += b;
  return n;
}

CollectiveTally CollectiveTally::since(const CollectiveTally& before) const {
  CollectiveTally d;
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    d.calls[k] = calls[k] - before.calls[k];
    d.bytes[k] = bytes[k] - before.bytes[k];
  }
  return d;
}

CollectiveTally Communicator::tally() const {
  CollectiveTally t;
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    t.calls[k] = calls_[k].load(std::memory_order_relaxed);
    t.bytes[k] = bytes_[k].load(std::memory_order_relaxed);
  }
  return t;
}

void Communicator::count(CollectiveKind kind, std::size_t bytes) {
  const auto k = static_cast<std::size_t>(kind);
  calls_.at(k).fetch_add(1, std::memory_order_relaxed);
  bytes_.at(k).fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
}

namespace {
std::size_t bytes_of(const MatRef& m) {
  return static_cast<std::size_t>(m.rows * m.cols) * dtype_size(m.dtype);
}
std::string shape(const MatRef& m) {
  return "[" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "]";
}
void require_contiguous(const MatRef& m, const char* who, const char* what) {
  if (m.rows > 1 && m.ld != m.cols)
    throw std::invalid_argument(std::string(who) + " " + what +
                                ": the views must be contiguous (ld == cols)");
}
}  // namespace

void check_reduce_scatter_shapes(const MatRef& src, const MatRef& dst, int size, const char* who) {
  if (src.rows != dst.rows * size || src.cols != dst.cols || src.dtype != dst.dtype) {
    throw std::invalid_argument(std::string(who) + " reduce_scatter: " + std::to_string(size) +
                                " ranks of dst " + shape(dst) + " need src [" +
                                std::to_string(dst.rows * size) + ", " + std::to_string(dst.cols) +
                                "], got " + shape(src));
  }
  require_contiguous(src, who, "reduce_scatter");
  require_contiguous(dst, who, "reduce_scatter");
}

void check_gather_rows_shapes(const MatRef& src, const MatRef& dst, int size, const char* who) {
  if (dst.rows != src.rows * size || dst.cols != src.cols || dst.dtype != src.dtype) {
    throw std::invalid_argument(std::string(who) + " all_gather_rows: " + std::to_string(size) +
                                " ranks of src " + shape(src) + " need dst [" +
                                std::to_string(src.rows * size) + ", " + std::to_string(src.cols) +
                                "], got " + shape(dst));
  }
  require_contiguous(src, who, "all_gather_rows");
  require_contiguous(dst, who, "all_gather_rows");
}

std::int64_t check_all_to_all_shapes(const MatRef& src, const std::vector<std::int64_t>& send_rows,
                                     const MatRef& dst, const std::vector<std::int64_t>& recv_rows,
                                     int size, const char* who) {
  const auto total = [&](const std::vector<std::int64_t>& counts, const char* what) {
    if (static_cast<int>(counts.size()) != size)
      throw std::invalid_argument(std::string(who) + " all_to_all_rows: " + std::to_string(size) +
                                  " ranks need " + std::to_string(size) + " " + what +
                                  " counts, got " + std::to_string(counts.size()));
    std::int64_t n = 0;
    for (const auto c : counts) {
      if (c < 0)
        throw std::invalid_argument(std::string(who) + " all_to_all_rows: a negative " + what +
                                    " count (" + std::to_string(c) + ")");
      n += c;
    }
    return n;
  };
  const std::int64_t sent = total(send_rows, "send"), received = total(recv_rows, "receive");
  if (src.cols != dst.cols || src.dtype != dst.dtype || src.rows < sent || dst.rows < received)
    throw std::invalid_argument(std::string(who) + " all_to_all_rows: src " + shape(src) +
                                " sends " + std::to_string(sent) + " rows and dst " + shape(dst) +
                                " receives " + std::to_string(received) +
                                ": they need the rows, one width and one dtype");
  require_contiguous(src, who, "all_to_all_rows");
  require_contiguous(dst, who, "all_to_all_rows");
  return sent;
}

void Communicator::all_to_all_rows(const MatRef&, const std::vector<std::int64_t>&, const MatRef&,
                                   const std::vector<std::int64_t>&) {
  throw std::invalid_argument("the " + name() +
                              " communicator has no all-to-all (expert parallelism's "
                              "dispatch and combine)");
}

namespace comm {

void check_gather_shapes(const MatRef& src, const MatRef& dst, int size, const char* who) {
  if (dst.rows != src.rows || dst.cols != src.cols * size || dst.dtype != src.dtype) {
    throw std::invalid_argument(
        std::string(who) + " all_gather: dst is [" + std::to_string(dst.rows) + ", " +
        std::to_string(dst.cols) + "] but " + std::to_string(size) + " ranks of src [" +
        std::to_string(src.rows) + ", " + std::to_string(src.cols) + "] need [" +
        std::to_string(src.rows) + ", " + std::to_string(src.cols * size) + "]");
  }
}

namespace {

struct Shared {
  explicit Shared(int n, double timeout)
      : size(n),
        timeout_s(timeout),
        slots(static_cast<std::size_t>(n)),
        hashes(static_cast<std::size_t>(n)),
        arrived_flags(static_cast<std::size_t>(n)),
        counts(static_cast<std::size_t>(n)),
        receives(static_cast<std::size_t>(n)) {}
  int size;
  double timeout_s;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  std::uint64_t generation = 0;
  std::string failure;  // set once: every later wait throws it
  std::vector<MatRef> slots;
  std::vector<std::uint64_t> hashes;
  std::vector<char> arrived_flags;
  std::vector<std::vector<std::int64_t>> counts;    // all_to_all_rows: every rank's send counts
  std::vector<std::vector<std::int64_t>> receives;  // and what every rank expects to receive

  // All ranks meet here; throws on timeout or when another rank failed.
  void barrier(int rank, const char* what) {
    std::unique_lock lock(mu);
    if (!failure.empty()) throw std::runtime_error(failure);
    const std::uint64_t gen = generation;
    arrived_flags[static_cast<std::size_t>(rank)] = 1;
    if (++arrived == size) {
      arrived = 0;
      std::fill(arrived_flags.begin(), arrived_flags.end(), 0);
      ++generation;
      cv.notify_all();
      return;
    }
    const bool done = cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                  [&] { return generation != gen || !failure.empty(); });
    if (!failure.empty()) throw std::runtime_error(failure);
    if (!done) {
      std::string missing;
      for (int r = 0; r < size; ++r) {
        if (!arrived_flags[static_cast<std::size_t>(r)])
          missing.append(missing.empty() ? "" : ",").append(std::to_string(r));
      }
      failure = "in-process communicator: rank " + std::to_string(rank) + " waited " +
                std::to_string(timeout_s) + " s in " + what + " for rank(s) " + missing +
                " that never arrived; aborting the group";
      cv.notify_all();
      throw std::runtime_error(failure);
    }
  }
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Shared> shared, int rank)
      : s_(std::move(shared)), rank_(rank) {}
  std::string name() const override { return "inprocess"; }
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }
  bool modelled() const override { return false; }
  double timeout_seconds() const override { return s_->timeout_s; }

  void all_reduce(const MatRef& data) override {
    s_->slots[static_cast<std::size_t>(rank_)] = data;
    s_->barrier(rank_, "all_reduce");
    for (int r = 0; r < s_->size; ++r) {
      const MatRef& o = s_->slots[static_cast<std::size_t>(r)];
      if (o.rows != data.rows || o.cols != data.cols || o.dtype != data.dtype) {
        throw std::invalid_argument("in-process all_reduce: rank " + std::to_string(r) +
                                    " passed a different shape or dtype than rank " +
                                    std::to_string(rank_));
      }
    }
    // Sum in rank order into a float scratch, wait until everyone has read, then store.
    std::vector<float> sum(static_cast<std::size_t>(data.rows * data.cols), 0.0f);
    for (int r = 0; r < s_->size; ++r) {
      const MatRef& o = s_->slots[static_cast<std::size_t>(r)];
      for (std::int64_t i = 0; i < data.rows; ++i) {
        for (std::int64_t j = 0; j < data.cols; ++j)
          sum[static_cast<std::size_t>(i * data.cols + j)] += load(o, i, j);
      }
    }
    s_->barrier(rank_, "all_reduce");
    for (std::int64_t i = 0; i < data.rows; ++i) {
      for (std::int64_t j = 0; j < data.cols; ++j)
        store(data, i, j, sum[static_cast<std::size_t>(i * data.cols + j)]);
    }
    count(CollectiveKind::all_reduce, bytes_of(data));
  }

  void all_gather(const MatRef& src, const MatRef& dst) override {
    check_gather_shapes(src, dst, s_->size, "in-process");
    s_->slots[static_cast<std::size_t>(rank_)] = src;
    s_->barrier(rank_, "all_gather");
    for (int r = 0; r < s_->size; ++r) {
      const MatRef& o = s_->slots[static_cast<std::size_t>(r)];
      if (o.rows != src.rows || o.cols != src.cols || o.dtype != src.dtype) {
        throw std::invalid_argument("in-process all_gather: rank " + std::to_string(r) +
                                    " passed a different shape or dtype than rank " +
                                    std::to_string(rank_));
      }
      unpack(pack(o).data(), gather_block(dst, src, r));
    }
    s_->barrier(rank_, "all_gather");  // nobody overwrites its src before all have copied it
    count(CollectiveKind::all_gather, bytes_of(src) * static_cast<std::size_t>(s_->size));
  }

  void reduce_scatter(const MatRef& src, const MatRef& dst) override {
    check_reduce_scatter_shapes(src, dst, s_->size, "in-process");
    s_->slots[static_cast<std::size_t>(rank_)] = src;
    s_->barrier(rank_, "reduce_scatter");
    require_same_shapes(src, "reduce_scatter");
    // This rank's rows of every rank's src, summed in rank order (bit-identical to all_reduce).
    const std::int64_t row0 = rank_ * dst.rows;
    for (std::int64_t i = 0; i < dst.rows; ++i) {
      for (std::int64_t j = 0; j < dst.cols; ++j) {
        float sum = 0.0f;
        for (int r = 0; r < s_->size; ++r)
          sum += load(s_->slots[static_cast<std::size_t>(r)], row0 + i, j);
        store(dst, i, j, sum);
      }
    }
    s_->barrier(rank_, "reduce_scatter");  // nobody overwrites its src before all have read it
    count(CollectiveKind::reduce_scatter, bytes_of(src));
  }

  void all_gather_rows(const MatRef& src, const MatRef& dst) override {
    check_gather_rows_shapes(src, dst, s_->size, "in-process");
    s_->slots[static_cast<std::size_t>(rank_)] = src;
    s_->barrier(rank_, "all_gather_rows");
    require_same_shapes(src, "all_gather_rows");
    const std::size_t block = static_cast<std::size_t>(src.rows * src.cols) * dtype_size(src.dtype);
    for (int r = 0; r < s_->size; ++r) {
      auto* to = static_cast<std::byte*>(dst.data) + block * static_cast<std::size_t>(r);
      const void* from = s_->slots[static_cast<std::size_t>(r)].data;
      if (to != from) std::memcpy(to, from, block);  // src may be this rank's block (in place)
    }
    s_->barrier(rank_, "all_gather_rows");
    count(CollectiveKind::all_gather, block * static_cast<std::size_t>(s_->size));
  }

  void all_to_all_rows(const MatRef& src, const std::vector<std::int64_t>& send_rows,
                       const MatRef& dst, const std::vector<std::int64_t>& recv_rows) override {
    check_all_to_all_shapes(src, send_rows, dst, recv_rows, s_->size, "in-process");
    const auto me = static_cast<std::size_t>(rank_);
    s_->slots[me] = src;
    s_->counts[me] = send_rows;
    s_->receives[me] = recv_rows;
    s_->barrier(rank_, "all_to_all_rows");
    // Every rank checks every pair before any copies, so all of them refuse a mismatch together
    // (a rank that threw alone would free the source another rank is reading).
    for (int from = 0; from < s_->size; ++from)
      for (int to = 0; to < s_->size; ++to) {
        const std::int64_t sent =
            s_->counts[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
        const std::int64_t expected =
            s_->receives[static_cast<std::size_t>(to)][static_cast<std::size_t>(from)];
        if (sent != expected)
          throw std::invalid_argument("in-process all_to_all_rows: rank " + std::to_string(from) +
                                      " sends " + std::to_string(sent) + " rows to rank " +
                                      std::to_string(to) + ", which expects " +
                                      std::to_string(expected));
      }
    const std::size_t row_bytes = static_cast<std::size_t>(src.cols) * dtype_size(src.dtype);
    std::int64_t at = 0;  // dst row: sources in rank order
    for (int r = 0; r < s_->size; ++r) {
      const auto from_rank = static_cast<std::size_t>(r);
      const std::vector<std::int64_t>& theirs = s_->counts[from_rank];
      std::int64_t from = 0;  // rank r's rows for the ranks before this one
      for (std::size_t d = 0; d < me; ++d) from += theirs[d];
      const auto bytes = static_cast<std::size_t>(recv_rows[from_rank]) * row_bytes;
      if (bytes > 0)
        std::memcpy(static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(at) * row_bytes,
                    static_cast<const std::byte*>(s_->slots[from_rank].data) +
                        static_cast<std::size_t>(from) * row_bytes,
                    bytes);
      at += recv_rows[from_rank];
    }
    s_->barrier(rank_, "all_to_all_rows");  // nobody overwrites its src before all have read it
    // What this rank sends: its rows, which the other ranks copied out of its src.
    std::int64_t sent = 0;
    for (const auto n : send_rows) sent += n;
    count(CollectiveKind::all_to_all, static_cast<std::size_t>(sent) * row_bytes);
  }

  void check_same_config(const std::string& config) override {
    s_->hashes[static_cast<std::size_t>(rank_)] = config_hash(config);
    s_->barrier(rank_, "check_same_config");
    const auto hashes = s_->hashes;  // copied before the next barrier lets a rank move on
    s_->barrier(rank_, "check_same_config");
    require_same_config(hashes, config);
  }

 private:
  void require_same_shapes(const MatRef& mine, const char* what) const {
    for (int r = 0; r < s_->size; ++r) {
      const MatRef& o = s_->slots[static_cast<std::size_t>(r)];
      if (o.rows != mine.rows || o.cols != mine.cols || o.dtype != mine.dtype) {
        throw std::invalid_argument(
            std::string("in-process ") + what + ": rank " + std::to_string(r) +
            " passed a different shape or dtype than rank " + std::to_string(rank_));
      }
    }
  }

  std::shared_ptr<Shared> s_;
  int rank_;
};

}  // namespace
}  // namespace comm

std::vector<std::unique_ptr<Communicator>> make_inprocess_group(int size, double timeout_s) {
  if (size < 1) throw std::invalid_argument("in-process group: size must be >= 1");
  auto shared = std::make_shared<comm::Shared>(size, timeout_s);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r)
    out.push_back(std::make_unique<comm::InProcessCommunicator>(shared, r));
  return out;
}

}  // namespace fusebench
