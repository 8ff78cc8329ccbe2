#include "backends/cpu_gemm.hpp"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <tuple>
#include <unordered_map>

#include "backends/cpu_elementwise.hpp"
#include "backends/cpu_int8_gemm.hpp"
#include "backends/host_mat.hpp"

#ifdef FUSEBENCH_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace fusebench::cpu {
namespace {

// AVX512-VNNI (CPUID.7.0:ECX[11]) or AVX-VNNI (CPUID.7.1:EAX[4]), read from CPUID: clang 14's
// __builtin_cpu_supports knows no "avxvnni".
bool cpu_has_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11))) return true;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4))) return true;
#endif
  return false;
}

blasint as_blasint(std::int64_t v) { return static_cast<blasint>(v); }

// A strided matrix as dense fp32 rows in `out`, which the caller keeps across calls: a fresh
// vector per GEMM (12 MB for one Qwen3-MoE expert's w13) page-faulted on every run. bf16 is the
// top half of an fp32, so its widening is a shift the compiler vectorizes (load() per element
// is a call per element).
void widen_into(const MatRef& m, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    float* dst = out.data() + static_cast<std::size_t>(r * m.cols);
    if (m.dtype == DType::bf16) {
      const auto* src = static_cast<const std::uint16_t*>(m.data) + r * m.ld;
      for (std::int64_t c = 0; c < m.cols; ++c) {
        const std::uint32_t bits = static_cast<std::uint32_t>(src[c]) << 16;
        std::memcpy(dst + c, &bits, sizeof bits);
      }
    } else {
      for (std::int64_t c = 0; c < m.cols; ++c) dst[c] = load(m, r, c);
    }
  }
}

void store_rows(const std::vector<float>& src, const MatRef& y) {
  for (std::int64_t r = 0; r < y.rows; ++r) {
    for (std::int64_t c = 0; c < y.cols; ++c)
      store(y, r, c, src[static_cast<std::size_t>(r * y.cols + c)]);
  }
}

bool has_bias(const GemmArgs& a) { return a.bias.data != nullptr; }

void require_bias_shape(const GemmArgs& a) {
  if (has_bias(a) && (a.bias.rows != a.y.cols || a.bias.dtype != a.y.dtype)) {
    throw std::invalid_argument("cpu gemm: a bias of " + std::to_string(a.bias.rows) + " " +
                                std::string(to_string(a.bias.dtype)) + " elements for " +
                                std::to_string(a.y.cols) + " " + std::string(to_string(a.y.dtype)) +
                                " output columns");
  }
}

// Rows [0, m) of out (row stride ld) = the bias, in fp32: the BLAS calls then accumulate onto it
// (beta = 1), so the bias is added in the GEMM's own library call as cuBLASLt's epilogue adds it
// in its kernel, before the one rounding to the output dtype.
void fill_with_bias(const MatRef& bias, float* out, std::int64_t m, std::int64_t n,
                    std::int64_t ld) {
  for (std::int64_t c = 0; c < n; ++c) out[c] = load(bias, c, 0);
  for (std::int64_t r = 1; r < m; ++r) std::memcpy(out + r * ld, out, sizeof(float) * n);
}

// beta of the BLAS calls: 1 onto the bias fill_with_bias() wrote, else 0.
float prepare_fp32_output(const GemmArgs& a, float* out, std::int64_t ld) {
  if (!has_bias(a)) return 0.0f;
  fill_with_bias(a.bias, out, a.y.rows, a.y.cols, ld);
  return 1.0f;
}

void require_dtype(GemmPath path, const GemmArgs& a, DType want) {
  if (a.x.dtype != want || a.w.dtype != want || a.y.dtype != want) {
    throw std::invalid_argument(std::string("cpu gemm path ") + to_string(path) + " takes " +
                                std::string(to_string(want)) + " operands, got " +
                                std::string(to_string(a.x.dtype)));
  }
}

// OpenMP's thread count as oneDNN sees it (libgomp is loaded by libdnnl; looked up at run time
// so this file needs no OpenMP flags, which clang's ASan build lacks). -1: no OpenMP loaded.
int omp_max_threads() {
  using Fn = int (*)();
  static const auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return fn != nullptr ? fn() : -1;
}
void omp_set_threads(int n) {
  using Fn = void (*)(int);
  static const auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (fn != nullptr) fn(n);
}

std::string openblas_parallel() {
  switch (openblas_get_parallel()) {
    case 0:
      return "sequential";
    case 1:
      return "pthreads";
    case 2:
      return "openmp";
  }
  return "unknown";
}

}  // namespace

const char* to_string(GemmPath path) {
  switch (path) {
    case GemmPath::blas_gemv:
      return "openblas_sgemv";
    case GemmPath::blas_gemm:
      return "openblas_sgemm";
    case GemmPath::blas_sbgemm:
      return "openblas_sbgemm";
    case GemmPath::widened_sgemm:
      return "bf16_widened_openblas_sgemm";
    case GemmPath::dnnl_sgemm:
      return "onednn_sgemm";
    case GemmPath::dnnl_matmul:
      return "onednn_matmul";
  }
  return "unknown";
}

bool dnnl_built() {
#ifdef FUSEBENCH_HAVE_DNNL
  return true;
#else
  return false;
#endif
}

GemmPath choose_path(DType dtype, std::int64_t m, bool have_dnnl) {
  if (dtype == DType::f32) {
    if (m == 1) return GemmPath::blas_gemv;
    if (!have_dnnl) return GemmPath::blas_gemm;
    return m <= 3 ? GemmPath::dnnl_sgemm : GemmPath::dnnl_matmul;
  }
  if (have_dnnl) return GemmPath::dnnl_matmul;
#ifdef FUSEBENCH_HAVE_SBGEMM
  return GemmPath::blas_sbgemm;
#else
  return GemmPath::widened_sgemm;
#endif
}

#ifdef FUSEBENCH_HAVE_DNNL
// One matmul primitive per shape, strides and dtype, created on first use (the warm-up run) and
// executed on the operands' own pointers.
struct CpuGemm::Dnnl {
  using Key = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, bool, int>;  // ..., threads
  struct Entry {
    dnnl::matmul primitive;
    dnnl::memory::desc x, w, y, bias;  // bias: empty without one
    std::string impl;
  };
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Entry> cache;
  // Where oneDNN has no bf16 matmul for this CPU (2.x wants AVX-512), bf16 takes the OpenBLAS path.
  bool bf16 = false;

  // int8: s8 x s8 -> s32, one primitive per shape and strides (and threads).
  using Int8Key =
      std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int>;
  std::map<Int8Key, std::pair<dnnl::matmul, std::string>> int8_cache;
  std::string int8_kernel, int8_why;

  Dnnl() {
    try {
      probe_bf16();
      bf16 = true;
    } catch (const dnnl::error&) {
      bf16 = false;
    }
    // Without VNNI, oneDNN's x64 int8 kernels sum u8*s8 pairs in int16 (vpmaddubsw), which
    // saturates for full-range 8-bit operands: the verifier found its outputs wrong on an
    // AVX2-only CPU. VNNI (vpdpbusd) accumulates in int32, exactly.
    if (!cpu_has_vnni()) {
      int8_why =
          "this CPU has no VNNI: oneDNN's AVX2 int8 kernels saturate the int16 pair sums of "
          "full-range 8-bit operands (vpmaddubsw), so their results would be wrong";
      return;
    }
    try {
      int8_kernel = int8_entry(2, 2, 2, 2, 2).second;
    } catch (const dnnl::error& e) {
      int8_why = std::string("oneDNN has no s8 x s8 -> s32 matmul here: ") + e.what();
    }
  }

  std::pair<dnnl::matmul, std::string>& int8_entry(std::int64_t m, std::int64_t n, std::int64_t k,
                                                   std::int64_t ldx, std::int64_t ldw) {
    const Int8Key key{m, n, k, ldx, ldw, omp_max_threads()};
    if (auto it = int8_cache.find(key); it != int8_cache.end()) return it->second;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc x({m, k}, dt::s8, dnnl::memory::dims{ldx, 1});
    const dnnl::memory::desc w({k, n}, dt::s8, dnnl::memory::dims{1, ldw});
    const dnnl::memory::desc y({m, n}, dt::s32, dnnl::memory::dims{n, 1});
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc pd(engine, x, w, y);
#else
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x, w, y), engine);
#endif
    return int8_cache.emplace(key, std::make_pair(dnnl::matmul(pd), pd.impl_info_str()))
        .first->second;
  }

  void int8_run(const std::int8_t* x, std::int64_t ldx, const std::int8_t* w, std::int64_t ldw,
                std::int32_t* y, std::int64_t m, std::int64_t n, std::int64_t k) {
    using dt = dnnl::memory::data_type;
    auto& e = int8_entry(m, n, k, ldx, ldw);
    dnnl::memory xm({{m, k}, dt::s8, dnnl::memory::dims{ldx, 1}}, engine,
                    const_cast<std::int8_t*>(x));
    dnnl::memory wm({{k, n}, dt::s8, dnnl::memory::dims{1, ldw}}, engine,
                    const_cast<std::int8_t*>(w));
    dnnl::memory ym({{m, n}, dt::s32, dnnl::memory::dims{n, 1}}, engine, y);
    e.first.execute(stream, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}});
    stream.wait();
  }

  // With and without a bias: the split and fused variants of a model with a bias must take the
  // same path.
  void probe_bf16() {
    std::uint16_t x[4] = {}, w[4] = {}, y[4] = {}, b[2] = {};
    entry({{x, DType::bf16, 2, 2, 2}, {w, DType::bf16, 2, 2, 2}, {y, DType::bf16, 2, 2, 2}});
    entry({{x, DType::bf16, 2, 2, 2},
           {w, DType::bf16, 2, 2, 2},
           {y, DType::bf16, 2, 2, 2},
           {b, DType::bf16, 2, 1, 1}});
  }

  Entry& entry(const GemmArgs& a) {
    const std::int64_t m = a.y.rows, n = a.y.cols, k = a.x.cols;
    const Key key{static_cast<int>(a.x.dtype),
                  m,
                  n,
                  k,
                  a.x.ld,
                  a.w.ld,
                  a.y.ld,
                  has_bias(a),
                  omp_max_threads()};
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    using dt = dnnl::memory::data_type;
    const dt type = a.x.dtype == DType::bf16 ? dt::bf16 : dt::f32;
    // x [M,K] row-major; w^T [K,N] read from w [N,K] row-major (strides 1, ldw); y [M,N].
    const dnnl::memory::desc x({m, k}, type, dnnl::memory::dims{a.x.ld, 1});
    const dnnl::memory::desc w({k, n}, type, dnnl::memory::dims{1, a.w.ld});
    const dnnl::memory::desc y({m, n}, type, dnnl::memory::dims{a.y.ld, 1});
    // The bias: N contiguous elements broadcast over the rows, added by the matmul itself (in
    // fp32, before the output is rounded).
    const dnnl::memory::desc bias = has_bias(a)
                                        ? dnnl::memory::desc({1, n}, type, dnnl::memory::dims{n, 1})
                                        : dnnl::memory::desc();
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc pd =
        has_bias(a) ? dnnl::matmul::primitive_desc(engine, x, w, bias, y)
                    : dnnl::matmul::primitive_desc(engine, x, w, y);
#else
    const dnnl::matmul::primitive_desc pd(
        has_bias(a) ? dnnl::matmul::desc(x, w, bias, y) : dnnl::matmul::desc(x, w, y), engine);
#endif
    return cache.emplace(key, Entry{dnnl::matmul(pd), x, w, y, bias, pd.impl_info_str()})
        .first->second;
  }

  void run(const GemmArgs& a) {
    Entry& e = entry(a);
    dnnl::memory x(e.x, engine, a.x.data), w(e.w, engine, a.w.data), y(e.y, engine, a.y.data);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
    if (has_bias(a)) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, engine, a.bias.data));
    e.primitive.execute(stream, args);
    stream.wait();
  }
};
#else
struct CpuGemm::Dnnl {};
#endif

CpuGemm::CpuGemm()
    : default_blas_threads_(openblas_get_num_threads()), default_omp_threads_(omp_max_threads()) {
#ifdef FUSEBENCH_HAVE_DNNL
  dnnl_ = std::make_unique<Dnnl>();
#endif
}

void CpuGemm::set_threads(int threads) {
  if (threads < 0) throw std::invalid_argument("cpu gemm threads must be >= 0");
  threads_ = threads;
}

int CpuGemm::threads() const {
  if (threads_ > 0) return threads_;
  const int budget = Backend::host_thread_budget();  // the run's policy (--cpu-threads)
  return budget > 0 ? budget : default_blas_threads_;
}

void CpuGemm::apply_threads() const {
  const int budget = Backend::host_thread_budget();
  const int chosen = threads_ > 0 ? threads_ : budget;
  const int blas = chosen > 0 ? chosen : default_blas_threads_;
  if (openblas_get_num_threads() != blas) openblas_set_num_threads(blas);
  if (default_omp_threads_ > 0) {
    const int omp = chosen > 0 ? chosen : default_omp_threads_;
    if (omp_max_threads() != omp) omp_set_threads(omp);
  }
}

CpuGemm::~CpuGemm() = default;

bool CpuGemm::int8_gemm(const std::int8_t* x, std::int64_t ldx, const std::int8_t* w,
                        std::int64_t ldw, std::int32_t* y, std::int64_t m, std::int64_t n,
                        std::int64_t k, const Int8Epilogue* epilogue) {
#ifdef FUSEBENCH_HAVE_DNNL
  if (dnnl_ != nullptr && !dnnl_->int8_kernel.empty()) {
    apply_threads();
    dnnl_->int8_run(x, ldx, w, ldw, y, m, n, k);
    // On the run's threads, vectorized: single-threaded, this loop outlasted an AMX kernel.
    if (epilogue != nullptr) int8_epilogue(*epilogue, y, m, n, threads());
    return true;
  }
#endif
  // No exact oneDNN kernel here (no VNNI): our own, exact on AVX2 (cpu_int8_gemm.hpp).
  if (!int8_avx2_available() || k > kInt8AvxMaxK) return false;
  int8_gemm_avx2(x, ldx, w, ldw, y, m, n, k, threads(), epilogue);
  return true;
}

std::string CpuGemm::int8_kernel() const {
#ifdef FUSEBENCH_HAVE_DNNL
  if (dnnl_ && !dnnl_->int8_kernel.empty())
    return "oneDNN's int8 matmul (s8 x s8 -> s32, exact; " + dnnl_->int8_kernel +
           " on a small probe)";
#endif
  return int8_avx2_available() ? int8_avx2_description() : "";
}

std::string CpuGemm::int8_unavailable() const {
  std::string why;
#ifdef FUSEBENCH_HAVE_DNNL
  why = dnnl_ ? dnnl_->int8_why : "oneDNN is not loaded";
#else
  why = "this build has no oneDNN (libdnnl-dev was not found)";
#endif
  return why + "; and this CPU has no AVX2 for fusebench's own int8 kernel";
}

bool CpuGemm::dnnl_takes(DType dtype) const {
#ifdef FUSEBENCH_HAVE_DNNL
  return dnnl_ != nullptr && (dtype == DType::f32 || (dtype == DType::bf16 && dnnl_->bf16));
#else
  (void)dtype;
  return false;
#endif
}

GemmPath CpuGemm::run(const GemmArgs& a) {
  const GemmPath path = choose_path(a.x.dtype, a.y.rows, dnnl_takes(a.x.dtype));
  run_path(path, a);
  return path;
}

void CpuGemm::run_path(GemmPath path, const GemmArgs& a) {
  apply_threads();
  const std::int64_t m = a.y.rows, n = a.y.cols, k = a.x.cols;
  require_bias_shape(a);
  auto* const y32 = static_cast<float*>(a.y.data);  // the fp32 paths' output
  switch (path) {
    case GemmPath::blas_gemv: {
      require_dtype(path, a, DType::f32);
      if (m != 1) throw std::invalid_argument("cpu gemm path openblas_sgemv takes M = 1");
      // y[0,:] = w[N,K] x[0,:] (+ bias)
      const float beta = prepare_fp32_output(a, y32, a.y.ld);
      cblas_sgemv(CblasRowMajor, CblasNoTrans, as_blasint(n), as_blasint(k), 1.0f,
                  static_cast<const float*>(a.w.data), as_blasint(a.w.ld),
                  static_cast<const float*>(a.x.data), 1, beta, y32, 1);
      return;
    }
    case GemmPath::blas_gemm: {
      require_dtype(path, a, DType::f32);
      const float beta = prepare_fp32_output(a, y32, a.y.ld);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blasint(m), as_blasint(n),
                  as_blasint(k), 1.0f, static_cast<const float*>(a.x.data), as_blasint(a.x.ld),
                  static_cast<const float*>(a.w.data), as_blasint(a.w.ld), beta, y32,
                  as_blasint(a.y.ld));
      return;
    }
    case GemmPath::blas_sbgemm: {
#ifdef FUSEBENCH_HAVE_SBGEMM
      require_dtype(path, a, DType::bf16);
      scratch_.resize(static_cast<std::size_t>(m * n));
      const float beta = prepare_fp32_output(a, scratch_.data(), n);
      cblas_sbgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blasint(m), as_blasint(n),
                   as_blasint(k), 1.0f, static_cast<const bfloat16*>(a.x.data), as_blasint(a.x.ld),
                   static_cast<const bfloat16*>(a.w.data), as_blasint(a.w.ld), beta,
                   scratch_.data(), as_blasint(n));
      store_rows(scratch_, a.y);
      return;
#else
      throw std::invalid_argument("this OpenBLAS has no cblas_sbgemm");
#endif
    }
    case GemmPath::widened_sgemm: {
      require_dtype(path, a, DType::bf16);
      // Exact widening, fp32 accumulate (bias included), one rounding on store: a bf16 GEMM's
      // numerics.
      widen_into(a.x, widened_x_);
      widen_into(a.w, widened_w_);
      scratch_.resize(static_cast<std::size_t>(m * n));
      const float beta = prepare_fp32_output(a, scratch_.data(), n);
      if (m == 1) {  // as the fp32 path: sgemm would pack the whole widened weight for one row
        cblas_sgemv(CblasRowMajor, CblasNoTrans, as_blasint(n), as_blasint(k), 1.0f,
                    widened_w_.data(), as_blasint(k), widened_x_.data(), 1, beta, scratch_.data(),
                    1);
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blasint(m), as_blasint(n),
                    as_blasint(k), 1.0f, widened_x_.data(), as_blasint(k), widened_w_.data(),
                    as_blasint(k), beta, scratch_.data(), as_blasint(n));
      }
      store_rows(scratch_, a.y);
      return;
    }
    case GemmPath::dnnl_sgemm:
#ifdef FUSEBENCH_HAVE_DNNL
    {
      require_dtype(path, a, DType::f32);
      const float beta = prepare_fp32_output(a, y32, a.y.ld);
      if (dnnl_sgemm('N', 'T', m, n, k, 1.0f, static_cast<const float*>(a.x.data), a.x.ld,
                     static_cast<const float*>(a.w.data), a.w.ld, beta, y32,
                     a.y.ld) != dnnl_success) {
        throw std::runtime_error("dnnl_sgemm failed (M=" + std::to_string(m) +
                                 ", N=" + std::to_string(n) + ", K=" + std::to_string(k) + ")");
      }
      return;
    }
#else
      throw std::invalid_argument("this build has no oneDNN (libdnnl-dev was not found)");
#endif
    case GemmPath::dnnl_matmul:
#ifdef FUSEBENCH_HAVE_DNNL
      if (a.x.dtype != DType::f32 && a.x.dtype != DType::bf16)
        throw std::invalid_argument("cpu gemm path onednn_matmul takes fp32 or bf16");
      if (a.w.dtype != a.x.dtype || a.y.dtype != a.x.dtype)
        throw std::invalid_argument("cpu gemm path onednn_matmul: operand dtypes differ");
      dnnl_->run(a);
      return;
#else
      throw std::invalid_argument("this build has no oneDNN (libdnnl-dev was not found)");
#endif
  }
  throw std::invalid_argument("unknown cpu gemm path");
}

std::string CpuGemm::describe(GemmPath path, const GemmArgs& a) {
  std::string text = to_string(path);
#ifdef FUSEBENCH_HAVE_DNNL
  if (path == GemmPath::dnnl_matmul) text += " " + dnnl_->entry(a).impl;
#else
  (void)a;
#endif
  if (path == GemmPath::blas_gemv || path == GemmPath::blas_gemm ||
      path == GemmPath::widened_sgemm) {
    text += std::string(" ") + openblas_get_corename();
  }
  if (has_bias(a)) text += " +bias";  // added in this call (matmul bias, or beta = 1 onto it)
  return text;
}

// The CPU's vector and matrix extensions a GEMM library may use (from /proc/cpuinfo's flags).
static nlohmann::json matrix_isa_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    nlohmann::json out = nlohmann::json::array();
    for (std::string f; words >> f;)
      if (f == "avx2" || f == "avx512f" || f == "avx512_vnni" || f == "avx_vnni" ||
          f == "avx512_bf16" || f == "amx_tile" || f == "amx_bf16" || f == "amx_int8")
        out.push_back(f);
    return out;
  }
  return "unknown: /proc/cpuinfo has no flags line";
}

nlohmann::json CpuGemm::context() const {
  nlohmann::json j;
  j["openblas"] = {{"config", openblas_get_config()},
                   {"core", openblas_get_corename()},
                   {"threading", openblas_parallel()},
                   {"threads", threads()}};
#ifdef FUSEBENCH_HAVE_DNNL
  const dnnl_version_t* v = dnnl_version();
  const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP          ? "openmp"
                        : v->cpu_runtime == DNNL_RUNTIME_TBB        ? "tbb"
                        : v->cpu_runtime == DNNL_RUNTIME_SEQ        ? "sequential"
                        : v->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool"
                                                                    : "other";
  j["onednn"] = {
      {"version",
       std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch)},
      {"git_hash", v->hash != nullptr ? v->hash : ""},
      {"threading", runtime},
      {"threads",
       v->cpu_runtime == DNNL_RUNTIME_OMP
           ? (threads_ > 0 || Backend::host_thread_budget() > 0 ? threads() : omp_max_threads())
           : -1}};
#else
  j["onednn"] = "unavailable: built without oneDNN (install libdnnl-dev)";
#endif
  const bool f32 = dnnl_takes(DType::f32), bf16 = dnnl_takes(DType::bf16);
  j["dispatch"] = {
      {"fp32_m1", to_string(choose_path(DType::f32, 1, f32))},
      {"fp32_m2_m3", to_string(choose_path(DType::f32, 2, f32))},
      {"fp32_m_ge_4", to_string(choose_path(DType::f32, 4, f32))},
      {"bf16", to_string(choose_path(DType::bf16, 1, bf16))},
      {"why",
       "measured on this suite's 2-core AVX-512 host (docs/cpu-gemm.md): OpenBLAS sgemm packs "
       "the whole weight for one row (sgemv, as numpy uses, is 2-3x faster at M=1); oneDNN's "
       "sgemm is fastest at M=2-3 and its JIT AVX-512 matmul from M=4 (up to 2x faster than "
       "OpenBLAS's Haswell kernels), and it runs bf16 natively"}};
  j["hardware_threads"] = std::thread::hardware_concurrency();
#ifdef FUSEBENCH_HAVE_DNNL
  // The kernel (and so the instruction set) each dtype runs with here, and the matrix ISAs the
  // CPU offers: whether AMX or VNNI could have run is a fact of the machine, not of the run.
  if (dnnl_ != nullptr) {
    nlohmann::json k = nlohmann::json::object();
    for (DType d : {DType::f32, DType::bf16}) {
      if (!dnnl_takes(d)) continue;
      const MatRef x{nullptr, d, 64, 256, 256}, w{nullptr, d, 256, 256, 256},
          y{nullptr, d, 64, 256, 256};
      try {
        k[std::string(to_string(d))] = dnnl_->entry({x, w, y, {}}).impl;
      } catch (const dnnl::error& e) {
        k[std::string(to_string(d))] = std::string("no oneDNN matmul: ") + e.what();
      }
    }
    k["int8"] = dnnl_->int8_kernel.empty() ? "not oneDNN: " + dnnl_->int8_why : dnnl_->int8_kernel;
    k["probe"] =
        "oneDNN's kernel for a 64x256x256 product of each dtype; each entry's gemm_algorithms "
        "names what ran at its own shapes";
    j["kernels"] = k;
  }
#endif
  j["matrix_isa"] = matrix_isa_flags();
  return j;
}

}  // namespace fusebench::cpu
