// The CPU backend's launch counter: `launches` is the number of backend library calls (BLAS
// GEMMs, SiLU-and-mul loops, read from Backend::library_calls()) plus the collective calls this
// rank makes (in-process, MPI or modelled; each is one kernel on the GPU) in one run of the
// region. There are no kernels, memcpys or memsets on the host, so those stay unavailable.
#include "measure/cpu_call_counter.hpp"

#include <stdexcept>

#include "fusebench/nvtx.hpp"
#include "fusebench/workspace.hpp"

namespace fusebench::measure {
namespace {

class CpuCallCounter final : public CounterCollector {
 public:
  explicit CpuCallCounter(Backend& backend) : backend_(backend) {}
  std::string name() const override { return "launch-count"; }

  RegionCounters collect(const std::string& region_name,
                         const std::function<void()>& region) override {
    NvtxRange range(region_name + "/launch-count");
    const std::int64_t before = backend_.library_calls();
    const std::int64_t collectives_before = Workspace::collectives_issued_on_this_thread();
    region();  // one run: the call count of a plan does not vary between runs
    const std::int64_t after = backend_.library_calls();
    const std::int64_t collectives =
        Workspace::collectives_issued_on_this_thread() - collectives_before;
    RegionCounters c;
    if (before < 0 || after < before) {
      c.unavailable["launches"] =
          "the " + backend_.name() + " backend does not count library calls";
    } else {
      c.values["launches"] = static_cast<double>(after - before + collectives);
    }
    const std::string why =
        "CPU backend: no kernels, memcpys or memsets (launches counts library calls)";
    for (const char* counter : {"kernels", "memcpys", "memsets"}) c.unavailable[counter] = why;
    return c;
  }

 private:
  Backend& backend_;
};

class UnavailablePass final : public CounterCollector {
 public:
  UnavailablePass(std::string name, std::vector<std::string> counters, std::string why)
      : name_(std::move(name)), counters_(std::move(counters)), why_(std::move(why)) {}
  std::string name() const override { return name_; }
  RegionCounters collect(const std::string&, const std::function<void()>&) override {
    RegionCounters c;
    for (const auto& counter : counters_) c.unavailable[counter] = why_;
    return c;
  }

 private:
  std::string name_;
  std::vector<std::string> counters_;
  std::string why_;
};

}  // namespace

std::unique_ptr<CounterCollector> make_cpu_call_counter(Backend& backend) {
  return std::make_unique<CpuCallCounter>(backend);
}

std::unique_ptr<CounterCollector> make_unavailable_pass(std::string name,
                                                        std::vector<std::string> counters,
                                                        std::string why) {
  return std::make_unique<UnavailablePass>(std::move(name), std::move(counters), std::move(why));
}

}  // namespace fusebench::measure
