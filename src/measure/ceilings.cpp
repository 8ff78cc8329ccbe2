#include "measure/ceilings.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

namespace fusebench::measure {
namespace {

using Clock = std::chrono::steady_clock;

// CPU ceilings repeat until the best has not improved by kSettleGain over this many repeats:
// one best-of-3 1024^3 GEMM gave bf16 "peaks" of 134-964 GFLOP/s between runs here.
constexpr int kCpuSettleReps = 8;
constexpr double kSettleGain = 0.01;
constexpr double kCpuCopyCapS = 0.3;  // per measurement: the whole CPU set stays under ~1 s
constexpr double kCpuGemmCapS = 0.3;

// Whether a repeat loop should go on: before `min_reps`, or while the best improved recently.
struct Settle {
  int min_reps = 0, since_gain = 0, reps = 0;
  double best = 0;
  double cap_s = 0;
  Clock::time_point start = Clock::now();
  void add(double value) {
    ++reps;
    if (value > best * (1 + kSettleGain)) {
      since_gain = 0;
    } else {
      ++since_gain;
    }
    best = std::max(best, value);
  }
  bool more() const {
    if (reps < min_reps) return true;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    return since_gain < kCpuSettleReps && elapsed < cap_s;
  }
};

double host_copy_bandwidth(std::size_t bytes, int* reps_taken) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  Settle settle{4, 0, 0, 0, kCpuCopyCapS};
  for (int i = 0; settle.more(); ++i) {
    const auto t0 = Clock::now();
    std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), bytes);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) settle.add(2.0 * static_cast<double>(bytes) / s);
  }
  *reps_taken = settle.reps;
  return settle.best;
}

std::optional<std::string> cpuinfo_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return std::nullopt;
}

// Best FLOP/s of `run` (one n x n x n product). With `device`, the products run for at least
// `min_load_s` (sustained load, so the clock settles where the power cap puts it) and the SM clock
// is probed right behind each one into `clocks`.
double time_peak(Backend& backend, std::int64_t n, int reps, DeviceTiming* device,
                 double min_load_s, std::vector<double>* clocks, int* reps_taken,
                 const std::function<void()>& run) {
  run();  // warm-up (algorithm selection)
  backend.synchronize();
  auto timer = backend.make_timer();
  constexpr int kMaxReps = 400;
  double loaded = 0, best = 0;
  // CPU: until the best settles (Settle); GPU: `reps` or more, for at least min_load_s.
  Settle settle{reps, 0, 0, 0, kCpuGemmCapS};
  for (int i = 0;
       i < kMaxReps && (device == nullptr ? settle.more() : (i < reps || loaded < min_load_s));
       ++i) {
    timer->start();
    run();
    timer->stop();
    // Enqueued behind the GEMM, after its stop event: it reads the clock the load left.
    if (device != nullptr) device->probe_clock();
    const double s = timer->seconds();
    loaded += s;
    if (s > 0) {
      const double flops = 2.0 * static_cast<double>(n) * n * n / s;
      best = std::max(best, flops);
      settle.add(flops);
    }
    *reps_taken = i + 1;
    if (device != nullptr) {
      backend.synchronize();
      if (const double mhz = device->probed_clock_mhz(); mhz > 0 && clocks) clocks->push_back(mhz);
    }
  }
  backend.take_algorithm_log();
  return best;
}

// Random, never-zero values of magnitude ~1/n (power draw, hence clocks, depend on the data); a
// 1 Mi-element pattern repeated keeps host generation cheap for the 8192^2 GPU operands.
std::vector<float> random_square(std::int64_t n) {
  const std::size_t elems = static_cast<std::size_t>(n * n);
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dist(0.1f, 1.0f);
  std::vector<float> pattern(std::min<std::size_t>(elems, 1u << 20));
  for (auto& v : pattern) v = (rng() & 1 ? 1.0f : -1.0f) * dist(rng) / static_cast<float>(n);
  std::vector<float> values(elems);
  for (std::size_t i = 0; i < elems; ++i) values[i] = pattern[i % pattern.size()];
  return values;
}

// Buffers of one measurement, released however it ends.
struct Buffers {
  Backend& backend;
  std::vector<void*> held;
  void* get(std::size_t bytes) { return held.emplace_back(backend.allocate(bytes)); }
  ~Buffers() {
    for (void* p : held) backend.release(p);
  }
};

// Best FLOP/s of an n x n x n product y = x w^T on random data.
double gemm_peak(Backend& backend, DType dtype, std::int64_t n, int reps, DeviceTiming* device,
                 double min_load_s, std::vector<double>* clocks, int* reps_taken) {
  const std::size_t bytes = static_cast<std::size_t>(n * n) * dtype_size(dtype);
  const auto encoded = encode(random_square(n), dtype);
  Buffers buf{backend, {}};
  void* x = buf.get(bytes);
  void* w = buf.get(bytes);
  void* y = buf.get(bytes);
  backend.upload(x, encoded.data(), bytes);
  backend.upload(w, encoded.data(), bytes);
  const GemmArgs args{{x, dtype, n, n, n}, {w, dtype, n, n, n}, {y, dtype, n, n, n}};
  return time_peak(backend, n, reps, device, min_load_s, clocks, reps_taken,
                   [&] { backend.gemm(args); });
}

// Best FLOP/s of the backend's scaled GEMM of `spec` on an n x n x n product of quantized random
// data (bf16 output), the activations' quantize not included: the GEMM's own ceiling. The 1x128
// group scales go up in the host's row-major order, not the layout a backend's own quantize may
// write (backend.hpp, QuantRef): the same values permuted, which changes the products' values,
// never the GEMM's work, and nothing reads them back.
double quant_gemm_peak(Backend& backend, const QuantSpec& spec, std::int64_t n, int reps,
                       DeviceTiming* device, double min_load_s, int* reps_taken) {
  const std::vector<float> values = random_square(n);
  Buffers buf{backend, {}};
  const auto upload = [&](const QuantMat& m) {
    QuantRef r{nullptr, m.rows, m.cols, m.cols, nullptr, m.kind, m.dtype};
    r.codes = static_cast<std::uint8_t*>(buf.get(m.codes.size()));
    r.scales = static_cast<float*>(buf.get(m.scales.size() * sizeof(float)));
    backend.upload(r.codes, m.codes.data(), m.codes.size());
    backend.upload(r.scales, m.scales.data(), m.scales.size() * sizeof(float));
    return r;
  };
  const QuantRef x =
      upload(quantize(values.data(), n, n, spec.dtype, scale_kind(spec.activations)));
  const QuantRef w = upload(quantize(values.data(), n, n, spec.dtype, scale_kind(spec.weights)));
  void* y = buf.get(static_cast<std::size_t>(n * n) * dtype_size(DType::bf16));
  const ScaledGemmArgs args{x, w, {y, DType::bf16, n, n, n}};
  return time_peak(backend, n, reps, device, min_load_s, nullptr, reps_taken,
                   [&] { backend.scaled_gemm(args); });
}
}  // namespace

Ceilings MeasuredCeilings::for_dtype(DType dtype) const {
  Ceilings c;
  c.bandwidth = bandwidth;
  if (auto it = peak_flops.find(dtype); it != peak_flops.end()) c.peak_flops = it->second;
  c.source = "measured";
  return c;
}

Ceilings MeasuredCeilings::for_quant(const QuantSpec& spec) const {
  Ceilings c;
  c.bandwidth = bandwidth;
  if (auto it = quant_peak_flops.find(spec.name()); it != quant_peak_flops.end())
    c.peak_flops = it->second;
  c.source = "measured";
  return c;
}

MeasuredCeilings measure_ceilings(Backend& backend, const std::vector<DType>& dtypes,
                                  DeviceTiming* device, const std::vector<QuantSpec>& quant) {
  MeasuredCeilings out;
  const bool gpu = device != nullptr;
  // GPU: 1 GiB per buffer is far beyond L2; CPU: 64 MiB beyond any LLC here, and cheap.
  const std::size_t copy_bytes = gpu ? (std::size_t{1} << 30) : (std::size_t{64} << 20);
  int copy_reps = gpu ? 10 : 0;
  out.bandwidth = gpu ? device->copy_bandwidth(copy_bytes, copy_reps)
                      : host_copy_bandwidth(copy_bytes, &copy_reps);
  const std::int64_t n = gpu ? 8192 : 1024;
  const int reps = gpu ? 10 : 4;
  int gemm_reps_max = 0;
  // GPU: 0.25 s of back-to-back GEMMs per dtype, long enough for the clock to settle under load.
  const double min_load_s = gpu ? 0.25 : 0;
  nlohmann::json by_dtype = nlohmann::json::object();
  std::vector<double> clocks;  // of the first dtype (the sweep's main one)
  for (DType d : dtypes) {
    if (!backend.unsupported_reason(d).empty() || out.peak_flops.count(d)) continue;
    int taken = 0;
    out.peak_flops[d] = gemm_peak(backend, d, n, reps, device, min_load_s,
                                  out.peak_flops.empty() ? &clocks : nullptr, &taken);
    gemm_reps_max = std::max(gemm_reps_max, taken);
    by_dtype[std::string(to_string(d))] = out.peak_flops[d];
  }
  nlohmann::json by_quant = nlohmann::json::object();
  for (const QuantSpec& spec : quant) {
    const std::string name = spec.name();
    if (by_quant.contains(name)) continue;
    if (const std::string why = backend.quant_unsupported_reason(spec); !why.empty()) {
      by_quant[name] = {{"unavailable", why}};
      continue;
    }
    int taken = 0;
    try {
      const double flops = quant_gemm_peak(backend, spec, n, reps, device, min_load_s, &taken);
      out.quant_peak_flops[name] = flops;
      by_quant[name] = {{"flops", flops}, {"execution", backend.quant_execution(spec.dtype)}};
      gemm_reps_max = std::max(gemm_reps_max, taken);
    } catch (const std::exception& e) {
      by_quant[name] = {{"unavailable", std::string("the scaled GEMM failed: ") + e.what()}};
    }
  }
  const std::string settle = gpu ? std::string()
                                 : " (repeated until the best had not improved by 1% over " +
                                       std::to_string(kCpuSettleReps) +
                                       " repeats, at most 0.3 s; up to " +
                                       std::to_string(gemm_reps_max) +
                                       " GEMM repeats taken), with the run's GEMM "
                                       "library path and threads";
  out.json = {
      {"source", "measured"},
      {"bandwidth", out.bandwidth},
      {"bandwidth_method",
       std::string(gpu ? "cudaMemcpyAsync device-to-device" : "memcpy") + " of " +
           std::to_string(copy_bytes >> 20) + " MiB, (read + written bytes) / time, best of " +
           std::to_string(copy_reps) + (gpu ? "" : " (until the best settled, at most 0.3 s)")},
      {"peak_flops_by_dtype", by_dtype},
      {"gemm_method",
       "backend GEMM " + std::to_string(n) + "^3 on random data, best of " +
           (gpu ? std::to_string(reps) + " or more (at least 0.25 s of GEMMs per dtype)"
                : "the repeats") +
           settle}};
  if (!by_quant.empty()) {
    out.json["peak_flops_by_quant"] = by_quant;
    out.json["quant_gemm_method"] =
        "the backend's scaled GEMM (as the quantized entries run it) on the same " +
        std::to_string(n) +
        "^3 product, operands quantized with the spec's scale granularity, bf16 output, the "
        "quantize itself not timed; best of the repeats as above; an emulated execution is the "
        "emulation's own ceiling, not the format's";
  }
  if (!gpu) out.json["physical_peak"] = cpu_physical_peak();
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

nlohmann::json cpu_physical_peak() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return {{"unavailable", "/proc/cpuinfo is not readable"}};
  std::ostringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  const auto flags = cpuinfo_value(text, "flags");
  const auto mhz = cpuinfo_value(text, "cpu MHz");
  const auto model = cpuinfo_value(text, "model name");
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (!flags || !mhz || cores < 1) return {{"unavailable", "/proc/cpuinfo lacks flags or cpu MHz"}};
  const auto has = [&](const std::string& flag) {
    std::istringstream f(*flags);
    std::string w;
    while (f >> w)
      if (w == flag) return true;
    return false;
  };
  const int lanes = has("avx512f") ? 16 : (has("avx2") || has("avx")) ? 8 : 4;
  const bool fma = has("fma") || has("avx512f");
  const double clock_hz = std::atof(mhz->c_str()) * 1e6;
  const double per_unit_fp32 =
      static_cast<double>(cores) * lanes * (fma ? 2 : 1) * clock_hz;  // one FMA: 2 FLOPs a lane
  const bool bf16_dot = has("avx512_bf16");
  nlohmann::json j = {
      {"cpu", model.value_or("unknown")},
      {"cores", cores},
      {"clock_mhz", clock_hz / 1e6},
      {"clock_source",
       "/proc/cpuinfo cpu MHz (under a hypervisor the nominal clock: a boost clock above it "
       "raises the true peak)"},
      {"fp32_lanes", lanes},
      {"fma", fma},
      {"bf16_dot_product", bf16_dot},
      {"fp32_per_fma_unit", per_unit_fp32},
      {"fp32_two_fma_units", 2 * per_unit_fp32},
      {"formula",
       "cores x fp32 lanes x 2 (FMA) x clock per FMA unit; bf16 dot products (avx512_bf16) do "
       "twice the fp32 FLOPs; FMA units per core (1 or 2 with AVX-512) are not exposed by "
       "cpuid, so one and two units are given"}};
  if (bf16_dot) {
    j["bf16_per_fma_unit"] = 2 * per_unit_fp32;
    j["bf16_two_fma_units"] = 4 * per_unit_fp32;
  }
  return j;
}

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// {"fp32": FLOP/s, ...}, as context.ceilings names the dtypes.
nlohmann::json by_dtype(const std::map<DType, double>& peaks) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [d, v] : peaks) j[std::string(to_string(d))] = v;
  return j;
}

nlohmann::json spread_of(const std::vector<double>& values) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  nlohmann::json j = {{"min", *lo}, {"max", *hi}};
  if (*lo > 0) j["max_over_min"] = *hi / *lo;
  return j;
}

}  // namespace

CeilingsLog::CeilingsLog(const MeasuredCeilings& measured) : t0_(steady_seconds()) {
  add_measurement(0, measured);
}

double CeilingsLog::now_s() const { return steady_seconds() - t0_; }

void CeilingsLog::add_measurement(double at_s, const MeasuredCeilings& measured) {
  Measurement m;
  m.at_s = at_s;
  m.measured = measured;
  m.bandwidth = measured.bandwidth;
  m.peak = measured.peak_flops;
  measurements_.push_back(std::move(m));
  if (measurements_.size() > 1) replay();
}

std::size_t CeilingsLog::nearest(double at_s) const {
  std::size_t best = 0;
  for (std::size_t i = 1; i < measurements_.size(); ++i)
    if (std::abs(measurements_[i].at_s - at_s) < std::abs(measurements_[best].at_s - at_s))
      best = i;
  return best;
}

Ceilings CeilingsLog::for_dtype(DType dtype, double at_s) const {
  const Measurement& m = measurements_[at_s < 0 ? 0 : nearest(at_s)];
  Ceilings c;
  c.bandwidth = m.bandwidth;
  if (auto it = m.peak.find(dtype); it != m.peak.end()) c.peak_flops = it->second;
  c.source = m.raised.empty() ? "measured" : "measured, raised to what the sweep observed";
  return c;
}

Ceilings CeilingsLog::for_quant(const QuantSpec& spec, double at_s) const {
  return measurements_[nearest(at_s)].measured.for_quant(spec);
}

void CeilingsLog::raise(Measurement& m, const std::string& name, const Seen& seen) const {
  const DType dtype = seen.dtype;
  const double seconds = seen.seconds;
  if (!(seconds > 0) || !m.peak.count(dtype) || !(m.bandwidth > 0) || !(m.peak[dtype] > 0)) return;
  const auto published = [&] {
    Ceilings c;
    c.bandwidth = m.bandwidth;
    c.peak_flops = m.peak[dtype];
    return c;
  };
  const double before_peak = m.peak[dtype], before_bw = m.bandwidth;
  if (roofline_seconds(seen.plan, published()) <= seconds) return;
  const Cost cost = cost_of(seen.plan);
  m.peak[dtype] = std::max(m.peak[dtype], cost.flops / seconds);
  m.bandwidth = std::max(m.bandwidth, cost.bytes / seconds);
  // Steps bound differently each may still sum above the time: scale both (the ridge stays).
  const double over = roofline_seconds(seen.plan, published()) / seconds;
  if (over > 1) {
    m.peak[dtype] *= over;
    m.bandwidth *= over;
  }
  ++m.raised_count;
  if (m.raised.size() >= 32) return;  // the first ones say why; the count says how many
  m.raised.push_back({{"entry", name},
                      {"dtype", to_string(dtype)},
                      {"seconds", seconds},
                      {"peak_flops_from", before_peak},
                      {"peak_flops_to", m.peak[dtype]},
                      {"bandwidth_from", before_bw},
                      {"bandwidth_to", m.bandwidth}});
}

void CeilingsLog::replay() {
  for (Measurement& m : measurements_) {
    m.bandwidth = m.measured.bandwidth;
    m.peak = m.measured.peak_flops;
    m.raised = nlohmann::json::array();
    m.raised_count = 0;
  }
  for (const auto& [name, seen] : observed_) raise(measurements_[nearest(seen.at_s)], name, seen);
}

void CeilingsLog::observe(const std::string& name, DType dtype, const Plan& plan, double seconds,
                          double at_s) {
  Seen seen{plan, dtype, seconds, at_s < 0 ? now_s() : at_s};
  raise(measurements_[nearest(seen.at_s)], name, seen);
  last_[name] = observed_.size();
  observed_.emplace_back(name, std::move(seen));
}

double CeilingsLog::fraction(const std::string& name, double seconds) const {
  const auto it = last_.find(name);
  if (it == last_.end()) return -1;
  const Seen& seen = observed_[it->second].second;
  return roofline_fraction(seen.plan, seconds, for_dtype(seen.dtype, seen.at_s));
}

double CeilingsLog::judged_against_s(const std::string& name) const {
  const auto it = last_.find(name);
  if (it == last_.end()) return -1;
  return measurements_[nearest(observed_[it->second].second.at_s)].at_s;
}

nlohmann::json CeilingsLog::json() const {
  const Measurement& first = measurements_.front();
  nlohmann::json j = first.measured.json;
  if (!first.raised.empty()) {
    j["source"] = "measured, raised to what the sweep observed";
    j["measured_bandwidth"] = first.measured.bandwidth;
    j["measured_peak_flops_by_dtype"] = j["peak_flops_by_dtype"];
    j["bandwidth"] = first.bandwidth;
    j["peak_flops_by_dtype"] = by_dtype(first.peak);
    if (j.contains("peak_flops_dtype")) {
      for (const auto& [d, v] : first.peak)
        if (to_string(d) == j["peak_flops_dtype"].get<std::string>()) j["peak_flops"] = v;
    }
    j["raised"] = first.raised;
    j["raised_count"] = first.raised_count;
    j["raised_note"] =
        "the sweep ran faster than a measured ceiling: published ceilings are never below what "
        "the sweep observed (each raise names its entry), so roofline_fraction <= 1 by "
        "construction";
  }
  if (measurements_.size() < 2) return j;
  nlohmann::json each = nlohmann::json::array();
  std::vector<double> bandwidths;
  std::map<std::string, std::vector<double>> peaks;
  for (const Measurement& m : measurements_) {
    for (const auto& [d, v] : m.measured.peak_flops) peaks[std::string(to_string(d))].push_back(v);
    nlohmann::json quant = nlohmann::json::object();
    for (const auto& [spec, v] : m.measured.quant_peak_flops) quant[spec] = v;
    bandwidths.push_back(m.measured.bandwidth);
    nlohmann::json e = {{"at_s", m.at_s},
                        {"bandwidth", m.measured.bandwidth},
                        {"peak_flops_by_dtype", by_dtype(m.measured.peak_flops)}};
    if (!quant.empty()) e["peak_flops_by_quant"] = quant;
    if (m.raised_count > 0) {
      e["published_bandwidth"] = m.bandwidth;
      e["published_peak_flops_by_dtype"] = by_dtype(m.peak);
      e["raised_count"] = m.raised_count;
    }
    each.push_back(std::move(e));
  }
  nlohmann::json spread = {{"bandwidth", spread_of(bandwidths)}};
  for (const auto& [d, v] : peaks) spread["peak_flops_by_dtype"][d] = spread_of(v);
  j["over_run"] = {
      {"measurements", each},
      {"spread", spread},
      {"rule",
       "the ceilings were measured again during the run (--ceilings-every); each entry's "
       "roofline_fraction is taken against the measurement nearest the time its results were "
       "taken (the entry's ceilings_at_s), raised only by the entries nearest that "
       "measurement. The fields above are the first measurement's"}};
  return j;
}

double roofline_fraction(const Plan& plan, double measured_s, const Ceilings& c) {
  if (!(measured_s > 0) || !(c.peak_flops > 0) || !(c.bandwidth > 0)) return -1;
  return roofline_seconds(plan, c) / measured_s;
}

}  // namespace fusebench::measure
