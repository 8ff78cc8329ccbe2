#include "measure/ceilings.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

namespace fusebench::measure {
namespace {

double host_copy_bandwidth(std::size_t bytes, int reps) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / s);
  }
  return best;
}

// Best FLOP/s of an n x n x n product y = x w^T on random data. With `device`, the GEMMs run
// for at least `min_load_s` (sustained load, so the clock settles where the power cap puts it)
// and the SM clock is probed right behind each one into `clocks`.
double gemm_peak(Backend& backend, DType dtype, std::int64_t n, int reps, DeviceTiming* device,
                 double min_load_s, std::vector<double>* clocks) {
  const std::size_t elems = static_cast<std::size_t>(n * n);
  const std::size_t bytes = elems * dtype_size(dtype);
  // Random, never-zero values (power draw, hence clocks, depend on the data); a 1 Mi-element
  // pattern repeated keeps host generation cheap for the 8192^2 GPU operands.
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dist(0.1f, 1.0f);
  std::vector<float> pattern(std::min<std::size_t>(elems, 1u << 20));
  for (auto& v : pattern) v = (rng() & 1 ? 1.0f : -1.0f) * dist(rng) / static_cast<float>(n);
  std::vector<float> values(elems);
  for (std::size_t i = 0; i < elems; ++i) values[i] = pattern[i % pattern.size()];
  const auto encoded = encode(values, dtype);
  void* x = backend.allocate(bytes);
  void* w = nullptr;
  void* y = nullptr;
  double best = 0;
  try {
    w = backend.allocate(bytes);
    y = backend.allocate(bytes);
    backend.upload(x, encoded.data(), bytes);
    backend.upload(w, encoded.data(), bytes);
    const GemmArgs args{{x, dtype, n, n, n}, {w, dtype, n, n, n}, {y, dtype, n, n, n}};
    backend.gemm(args);  // warm-up (algorithm selection)
    backend.synchronize();
    auto timer = backend.make_timer();
    constexpr int kMaxReps = 400;
    double loaded = 0;
    for (int i = 0; i < kMaxReps && (i < reps || loaded < min_load_s); ++i) {
      timer->start();
      backend.gemm(args);
      timer->stop();
      // Enqueued behind the GEMM, after its stop event: it reads the clock the load left.
      if (device != nullptr) device->probe_clock();
      const double s = timer->seconds();
      loaded += s;
      if (s > 0) best = std::max(best, 2.0 * static_cast<double>(n) * n * n / s);
      if (device != nullptr) {
        backend.synchronize();
        if (const double mhz = device->probed_clock_mhz(); mhz > 0 && clocks)
          clocks->push_back(mhz);
      }
    }
    backend.take_algorithm_log();
  } catch (...) {
    backend.release(x);
    if (w) backend.release(w);
    if (y) backend.release(y);
    throw;
  }
  backend.release(x);
  backend.release(w);
  backend.release(y);
  return best;
}

}  // namespace

Ceilings MeasuredCeilings::for_dtype(DType dtype) const {
  Ceilings c;
  c.bandwidth = bandwidth;
  if (auto it = peak_flops.find(dtype); it != peak_flops.end()) c.peak_flops = it->second;
  c.source = "measured";
  return c;
}

MeasuredCeilings measure_ceilings(Backend& backend, const std::vector<DType>& dtypes,
                                  DeviceTiming* device) {
  MeasuredCeilings out;
  const bool gpu = device != nullptr;
  // GPU: 1 GiB per buffer is far beyond L2; CPU: 64 MiB beyond any LLC here, and cheap.
  const std::size_t copy_bytes = gpu ? (std::size_t{1} << 30) : (std::size_t{64} << 20);
  const int copy_reps = gpu ? 10 : 4;
  out.bandwidth = gpu ? device->copy_bandwidth(copy_bytes, copy_reps)
                      : host_copy_bandwidth(copy_bytes, copy_reps);
  const std::int64_t n = gpu ? 8192 : 1024;
  const int reps = gpu ? 10 : 3;
  // GPU: 0.25 s of back-to-back GEMMs per dtype, long enough for the clock to settle under load.
  const double min_load_s = gpu ? 0.25 : 0;
  nlohmann::json by_dtype = nlohmann::json::object();
  std::vector<double> clocks;  // of the first dtype (the sweep's main one)
  for (DType d : dtypes) {
    if (!backend.unsupported_reason(d).empty() || out.peak_flops.count(d)) continue;
    out.peak_flops[d] = gemm_peak(backend, d, n, reps, device, min_load_s,
                                  out.peak_flops.empty() ? &clocks : nullptr);
    by_dtype[std::string(to_string(d))] = out.peak_flops[d];
  }
  out.json = {{"source", "measured"},
              {"bandwidth", out.bandwidth},
              {"bandwidth_method",
               std::string(gpu ? "cudaMemcpyAsync device-to-device" : "memcpy") + " of " +
                   std::to_string(copy_bytes >> 20) +
                   " MiB, (read + written bytes) / time, best of " + std::to_string(copy_reps)},
              {"peak_flops_by_dtype", by_dtype},
              {"gemm_method", "backend GEMM " + std::to_string(n) + "^3 on random data, best of " +
                                  std::to_string(reps) +
                                  (gpu ? " or more (at least 0.25 s of GEMMs per dtype)" : "")}};
  if (!clocks.empty()) {
    // The first probes may still see the idle-to-load transition: the second half settled.
    std::vector<double> settled(clocks.begin() + static_cast<std::ptrdiff_t>(clocks.size() / 2),
                                clocks.end());
    std::sort(settled.begin(), settled.end());
    out.loaded_clock_mhz = settled[settled.size() / 2];
    const auto [lo, hi] = std::minmax_element(clocks.begin(), clocks.end());
    out.json["sm_clock_under_load"] = {
        {"median_mhz", *out.loaded_clock_mhz},
        {"min_mhz", *lo},
        {"max_mhz", *hi},
        {"probes", clocks.size()},
        {"method",
         "SM clock probed right behind each GEMM of the peak measurement (at least 0.25 s of "
         "back-to-back GEMMs); median of the second half of the probes"}};
  } else if (gpu) {
    out.json["sm_clock_under_load"] = "unavailable: the clock probe returned no reading";
  }
  if (!dtypes.empty() && out.peak_flops.count(dtypes.front())) {
    out.json["peak_flops"] = out.peak_flops.at(dtypes.front());
    out.json["peak_flops_dtype"] = to_string(dtypes.front());
  }
  return out;
}

double roofline_fraction(const Plan& plan, double measured_s, const Ceilings& c) {
  if (!(measured_s > 0) || !(c.peak_flops > 0) || !(c.bandwidth > 0)) return -1;
  return roofline_seconds(plan, c) / measured_s;
}

}  // namespace fusebench::measure
