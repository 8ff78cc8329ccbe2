// Modelled communicator: one rank runs, collectives are priced by a link model and stand in as a
// delay of that length, so compute is measured and communication is modelled (and labelled so).
#include <chrono>
#include <stdexcept>
#include <thread>

#include "fusebench/communicator.hpp"
#include "fusebench/link_model.hpp"
#include "host_mat.hpp"
#ifdef FUSEBENCH_HAVE_CUDA
#include "delay.hpp"
#endif

namespace fusebench {
namespace {

class ModelledCommunicator final : public Communicator {
 public:
  ModelledCommunicator(int size, LinkProfile link, Backend& backend)
      : size_(size), link_(std::move(link)), backend_(backend) {}
  std::string name() const override { return "modelled:" + link_.name; }
  int rank() const override { return 0; }
  int size() const override { return size_; }
  bool modelled() const override { return true; }

  void all_reduce(const MatRef& data) override { priced(CollectiveKind::all_reduce, bytes(data)); }
  void all_gather(const MatRef& src, const MatRef& dst) override {
    comm::check_gather_shapes(src, dst, size_, "modelled");
    priced(CollectiveKind::all_gather, bytes(dst));
  }
  void reduce_scatter(const MatRef& src, const MatRef& dst) override {
    check_reduce_scatter_shapes(src, dst, size_, "modelled");
    priced(CollectiveKind::reduce_scatter, bytes(src));
  }
  void all_gather_rows(const MatRef& src, const MatRef& dst) override {
    check_gather_rows_shapes(src, dst, size_, "modelled");
    priced(CollectiveKind::all_gather, bytes(dst));
  }
  // This rank's rows sent (the modelled rank is rank 0's plan).
  void all_to_all_rows(const MatRef& src, const std::vector<std::int64_t>& send_rows,
                       const MatRef& dst, const std::vector<std::int64_t>& recv_rows) override {
    const std::int64_t sent =
        check_all_to_all_shapes(src, send_rows, dst, recv_rows, size_, "modelled");
    priced(CollectiveKind::all_to_all,
           static_cast<double>(sent * src.cols) * static_cast<double>(dtype_size(src.dtype)));
  }
  void check_same_config(const std::string&) override {}  // one process holds every "rank"

 private:
  // A delay of the link model's time for `bytes`; the tally counts the bytes priced (nothing
  // moves: modelled() tells a reader of the tally so).
  void priced(CollectiveKind kind, double bytes) {
    count(kind, static_cast<std::size_t>(bytes));
    delay(modelled_seconds(link_, kind, bytes, size_));
  }
  static double bytes(const MatRef& m) {
    return static_cast<double>(m.rows * m.cols) * static_cast<double>(dtype_size(m.dtype));
  }
  void delay(double seconds) {
    if (void* stream = backend_.stream()) {
#ifdef FUSEBENCH_HAVE_CUDA
      comm::enqueue_gpu_delay(stream, seconds);
      return;
#else
      (void)stream;
      throw std::logic_error("modelled communicator: a GPU stream in a build without CUDA");
#endif
    }
    // CPU: the region is timed on the host clock, so wait it out there (on the communication
    // thread when the plan overlaps lanes). Yielding lets compute threads have the core.
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) std::this_thread::yield();
  }

  int size_;
  LinkProfile link_;
  Backend& backend_;
};

}  // namespace

std::unique_ptr<Communicator> make_modelled_communicator(int size, const LinkProfile& link,
                                                         Backend& backend) {
  if (size < 1) throw std::invalid_argument("modelled communicator: size must be >= 1");
  return std::make_unique<ModelledCommunicator>(size, link, backend);
}

}  // namespace fusebench
