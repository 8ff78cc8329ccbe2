#pragma once
// Collectives used by the tensor-parallel pipelines, behind one interface: NCCL (real, GPU),
// in-process threads and MPI (CPU), and modelled (priced by a link model, data untouched).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/link_model.hpp"

namespace fusebench {

inline constexpr std::size_t kCollectiveKinds = 4;  // CollectiveKind's values, all_to_all last

// Calls and payload bytes of the collectives a communicator executed, per CollectiveKind (its
// index), in nccl-tests sizes: all-reduce the buffer, all-gather the total gathered size,
// reduce-scatter the total input, all-to-all the rows this rank sends (docs/tp.md).
struct CollectiveTally {
  std::array<std::int64_t, kCollectiveKinds> calls{}, bytes{};
  std::int64_t total_bytes() const;
  CollectiveTally since(const CollectiveTally& before) const;  // this minus `before`
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  // "inprocess", "mpi", "nccl", "modelled:<profile>"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void all_reduce(const MatRef& data) = 0;                    // sum, in place
  virtual void all_gather(const MatRef& src, const MatRef& dst) = 0;  // along columns
  // Sequence parallel, along rows (contiguous views: ld == cols). reduce_scatter sums every
  // rank's src [n*m, c] and leaves rows [rank*m, (rank+1)*m) of the sum in dst [m, c];
  // all_gather_rows concatenates every rank's src [m, c] into dst [n*m, c], rank r at rows
  // [r*m, (r+1)*m). nccl-tests sizes: src of the reduce-scatter, dst of the all-gather.
  virtual void reduce_scatter(const MatRef& src, const MatRef& dst) = 0;
  virtual void all_gather_rows(const MatRef& src, const MatRef& dst) = 0;
  // Expert parallelism's all-to-all of rows (AllToAllRowsStep, contiguous views): src's first
  // sum(send_rows) rows, grouped by destination rank, go to their ranks; dst's first
  // sum(recv_rows) rows receive them grouped by source rank. Every rank's send_rows[d] must equal
  // rank d's recv_rows[rank]. Communicators without it throw, naming themselves.
  virtual void all_to_all_rows(const MatRef& src, const std::vector<std::int64_t>& send_rows,
                               const MatRef& dst, const std::vector<std::int64_t>& recv_rows);
  // The largest message (bytes) a collective of the coming runs hands over: a communicator that
  // stages data allocates for it here, once, instead of between collectives. Called before every
  // run (cheap when nothing grows).
  virtual void reserve(std::size_t max_message_bytes) { (void)max_message_bytes; }
  // Exchanges a hash of `config` among the ranks and throws, naming the ranks that differ,
  // when they do not all hold the same one. Run before a fixture's first collective so a
  // mismatched launch fails with a message instead of hanging or summing unrelated buffers.
  virtual void check_same_config(const std::string& config) = 0;
  // True when collectives are not executed but priced by a link model (data left untouched).
  virtual bool modelled() const { return false; }
  // Seconds a collective may take before the run is aborted with a message.
  virtual double timeout_seconds() const { return 0; }
  // Every collective this communicator executed so far, counted by the communicator where it
  // hands the payload to its transport (in-process copies, the MPI and NCCL calls' counts); the
  // modelled communicator counts what it priced and moves nothing (modelled() says so).
  CollectiveTally tally() const;

 protected:
  // Each implementation's collectives call this once per call they executed.
  void count(CollectiveKind kind, std::size_t bytes);

 private:
  std::array<std::atomic<std::int64_t>, kCollectiveKinds> calls_{}, bytes_{};
};

// Seconds a collective may wait for its peers before the fixture fails (FUSEBENCH_COMM_TIMEOUT
// overrides the default of 120 s; a value that is not a number > 0 throws std::invalid_argument).
double default_comm_timeout();

// Skips every collective: the compute-only pass of a TP fixture (the data are left as they are).
class SkipCollectives final : public Communicator {
 public:
  SkipCollectives(int rank, int size) : rank_(rank), size_(size) {}
  std::string name() const override { return "skip"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(const MatRef&) override {}
  void all_gather(const MatRef&, const MatRef&) override {}
  void reduce_scatter(const MatRef&, const MatRef&) override {}
  void all_gather_rows(const MatRef&, const MatRef&) override {}
  void all_to_all_rows(const MatRef&, const std::vector<std::int64_t>&, const MatRef&,
                       const std::vector<std::int64_t>&) override {}
  void check_same_config(const std::string&) override {}

 private:
  int rank_, size_;
};

// Throws std::invalid_argument (naming `who` and the shapes) unless src/dst fit a row
// reduce-scatter or all-gather over `size` ranks and are contiguous.
void check_reduce_scatter_shapes(const MatRef& src, const MatRef& dst, int size, const char* who);
void check_gather_rows_shapes(const MatRef& src, const MatRef& dst, int size, const char* who);
// The same for all_to_all_rows: one count per rank, none negative, src and dst contiguous, of
// one dtype and width, holding the rows sent and received. Returns the rows sent.
std::int64_t check_all_to_all_shapes(const MatRef& src, const std::vector<std::int64_t>& send_rows,
                                     const MatRef& dst, const std::vector<std::int64_t>& recv_rows,
                                     int size, const char* who);

// A stable 64-bit hash (FNV-1a) used for the cross-rank configuration check.
std::uint64_t config_hash(const std::string& text);

// Throws, naming the ranks whose configuration hash differs from rank 0's (`hashes` holds every
// rank's config_hash, gathered by the communicator).
template <class Hashes>
void require_same_config(const Hashes& hashes, const std::string& config) {
  std::string differ;
  for (std::size_t r = 0; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) differ.append(" ").append(std::to_string(r));
  }
  if (!differ.empty()) {
    throw std::runtime_error("configuration mismatch across ranks: rank(s)" + differ +
                             " differ from rank 0 (this rank runs: " + config + ")");
  }
}

// In-process group: `size` communicators sharing memory, one per thread (CPU backends only:
// collectives read the other ranks' host buffers). Blocking; a rank that waits longer than
// `timeout_s` for its peers throws, and so do its peers.
std::vector<std::unique_ptr<Communicator>> make_inprocess_group(int size, double timeout_s);

struct LinkProfile;
// Rank 0 of `size` ranks whose collectives are not executed but priced by `link` (nccl-tests
// conventions, link_model.hpp). Each one stands in as a delay of the modelled length on the
// backend's stream (a spin kernel on the GPU, a busy wait on the CPU) so every timing regime
// includes it; the data are left untouched (outputs are not the reduced values).
std::unique_ptr<Communicator> make_modelled_communicator(int size, const LinkProfile& link,
                                                         Backend& backend);

}  // namespace fusebench
