// Candidate CPU GEMM paths for Y[M,N] = X[M,K] W[N,K]^T, fp32, measured interleaved under the
// same buffer rotation as fusebench (docs/cpu-gemm.md). Each BLAS is dlopen'ed
// RTLD_LOCAL|RTLD_DEEPBIND so their symbols do not mix; oneDNN is linked.
//   usage: fp32 N K M1,M2,... rounds cand1,cand2,... [warm]
//   env: CAND_THREADS (BLAS threads), OMP_NUM_THREADS (oneDNN, BLIS), DEBIAN_OPENBLAS,
//        SCIPY_OPENBLAS (path of scipy_openblas32's libscipy_openblas.so), BLIS, MKL_RT
// Ratios are against the first candidate; the "RESULT" lines feed alternate.py.
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <map>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
using sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
using sgemv_t = void (*)(int, int, int, int, float, const float*, int, const float*, int, float,
                         float*, int);
using setthr_t = void (*)(int);

struct Blas {
  sgemm_t gemm = nullptr;
  sgemv_t gemv = nullptr;
};

Blas open_blas(const char* path, const char* prefix, const char* setthreads, int threads) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    std::exit(1);
  }
  Blas b;
  b.gemm = (sgemm_t)dlsym(h, (std::string(prefix) + "cblas_sgemm").c_str());
  b.gemv = (sgemv_t)dlsym(h, (std::string(prefix) + "cblas_sgemv").c_str());
  if (setthreads && threads > 0) {
    if (auto f = (setthr_t)dlsym(h, setthreads)) f(threads);
  }
  if (!b.gemm || !b.gemv) {
    std::fprintf(stderr, "dlsym in %s failed\n", path);
    std::exit(1);
  }
  return b;
}

struct Set {
  std::vector<float> x, w, y;
};

struct Candidate {
  std::string name;
  std::function<void(int M, int N, int K, const float* x, const float* w, float* y)> run;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Exact order-statistic 95% interval of the median of n values (binomial ranks).
std::pair<double, double> median_ci(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const int n = (int)v.size();
  // smallest j with P(Bin(n,.5) < j) > 0.025 approximately, via normal approx for simplicity
  const double half = 1.96 * std::sqrt(n) / 2.0;
  int lo = std::max(0, (int)std::floor(n / 2.0 - half));
  int hi = std::min(n - 1, (int)std::ceil(n / 2.0 + half) - 1);
  return {v[lo], v[hi]};
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  // usage: cand N K M1,M2,... rounds cand1,cand2,... [warm]
  const int N = std::atoi(argv[1]), K = std::atoi(argv[2]);
  std::vector<int> Ms;
  for (char* s = std::strtok(argv[3], ","); s; s = std::strtok(nullptr, ",")) Ms.push_back(std::atoi(s));
  const int rounds = std::atoi(argv[4]);
  std::vector<std::string> names;
  for (char* s = std::strtok(argv[5], ","); s; s = std::strtok(nullptr, ",")) names.push_back(s);
  const bool warm = argc > 6 && std::string(argv[6]) == "warm";
  const int threads = std::getenv("CAND_THREADS") ? std::atoi(std::getenv("CAND_THREADS")) : 0;

  const auto env_or = [](const char* var, const char* fallback) {
    const char* v = std::getenv(var);
    return v != nullptr ? v : fallback;
  };
  Blas deb = open_blas(env_or("DEBIAN_OPENBLAS", "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"), "",
                       "openblas_set_num_threads", threads);
  Blas sci = open_blas(env_or("SCIPY_OPENBLAS", "libscipy_openblas.so"), "scipy_",
                       "scipy_openblas_set_num_threads", threads);
  Blas blis = open_blas(env_or("BLIS", "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4"), "", nullptr, 0);

  std::vector<Candidate> all = {
      {"deb_gemm",
       [&](int M, int N, int K, const float* x, const float* w, float* y) {
         deb.gemm(RowMajor, NoTrans, Trans, M, N, K, 1, x, K, w, K, 0, y, N);
       }},
      {"deb_gemv1",  // M==1 -> gemv, else gemm
       [&](int M, int N, int K, const float* x, const float* w, float* y) {
         if (M == 1)
           deb.gemv(RowMajor, NoTrans, N, K, 1, w, K, x, 1, 0, y, 1);
         else
           deb.gemm(RowMajor, NoTrans, Trans, M, N, K, 1, x, K, w, K, 0, y, N);
       }},
      {"deb_gemvM",  // M gemv calls
       [&](int M, int N, int K, const float* x, const float* w, float* y) {
         for (int r = 0; r < M; ++r)
           deb.gemv(RowMajor, NoTrans, N, K, 1, w, K, x + (size_t)r * K, 1, 0, y + (size_t)r * N, 1);
       }},
      {"sci_gemm",
       [&](int M, int N, int K, const float* x, const float* w, float* y) {
         sci.gemm(RowMajor, NoTrans, Trans, M, N, K, 1, x, K, w, K, 0, y, N);
       }},
      {"sci_gemv1",
       [&](int M, int N, int K, const float* x, const float* w, float* y) {
         if (M == 1)
           sci.gemv(RowMajor, NoTrans, N, K, 1, w, K, x, 1, 0, y, 1);
         else
           sci.gemm(RowMajor, NoTrans, Trans, M, N, K, 1, x, K, w, K, 0, y, N);
       }},
      {"blis_gemm",
       [&](int M, int N, int K, const float* x, const float* w, float* y) {
         blis.gemm(RowMajor, NoTrans, Trans, M, N, K, 1, x, K, w, K, 0, y, N);
       }},
      {"dnnl_sgemm",
       [&](int M, int N, int K, const float* x, const float* w, float* y) {
         dnnl_sgemm('N', 'T', M, N, K, 1, x, K, w, K, 0, y, N);
       }},
  };
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  static dnnl::stream strm(eng);
  struct Prim { dnnl::matmul p; dnnl::memory::desc s, w, d; };
  static std::map<std::tuple<int,int,int>, Prim> prims;
  auto get_prim = [&](int M, int N, int K) -> Prim& {
    auto key = std::make_tuple(M, N, K);
    auto it = prims.find(key);
    if (it != prims.end()) return it->second;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc s({M, K}, dt::f32, dnnl::memory::dims{K, 1});
    dnnl::memory::desc w({K, N}, dt::f32, dnnl::memory::dims{1, K});
    dnnl::memory::desc d({M, N}, dt::f32, dnnl::memory::dims{N, 1});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(s, w, d), eng);
    static bool once = false;
    if (!once) { std::printf("  matmul impl: %s\n", pd.impl_info_str()); once = true; }
    return prims.emplace(key, Prim{dnnl::matmul(pd), s, w, d}).first->second;
  };
  all.push_back({"dnnl_matmul", [&](int M, int N, int K, const float* x, const float* w, float* y) {
    Prim& p = get_prim(M, N, K);
    dnnl::memory ms(p.s, eng, (void*)x), mw(p.w, eng, (void*)w), md(p.d, eng, y);
    p.p.execute(strm, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    strm.wait();
  }});
  if (const char* mkl = std::getenv("MKL_RT")) {
    static Blas m = open_blas(mkl, "", "MKL_Set_Num_Threads", threads);
    all.push_back({"mkl_gemm", [&](int M, int N, int K, const float* x, const float* w, float* y) {
                     m.gemm(RowMajor, NoTrans, Trans, M, N, K, 1, x, K, w, K, 0, y, N);
                   }});
  }
  std::vector<Candidate> cands;
  for (auto& n : names)
    for (auto& c : all)
      if (c.name == n) cands.push_back(c);

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int M : Ms) {
    const size_t set_bytes = 4ull * ((size_t)M * K + (size_t)N * K + (size_t)M * N);
    const size_t cache = 402653184, budget = 256ull << 20;
    size_t sets = 1;
    if (!warm && set_bytes < 2 * cache)
      sets = std::min((2 * cache + set_bytes - 1) / set_bytes + 1, std::max<size_t>(1, budget / set_bytes));
    std::vector<Set> S(sets);
    for (size_t i = 0; i < sets; ++i) {
      Set& s = S[i];
      if (i == 0) {
        s.x.resize((size_t)M * K);
        s.w.resize((size_t)N * K);
        for (auto& v : s.x) v = u(rng);
        for (auto& v : s.w) v = u(rng) / 32;
      } else {
        s.x = S[0].x;
        s.w = S[0].w;
      }
      s.y.assign((size_t)M * N, 0.f);
    }
    // correctness against cands[0]
    std::vector<float> ref((size_t)M * N);
    cands[0].run(M, N, K, S[0].x.data(), S[0].w.data(), ref.data());
    for (auto& c : cands) {
      c.run(M, N, K, S[0].x.data(), S[0].w.data(), S[0].y.data());
      double err = 0;
      for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, (double)std::fabs(ref[i] - S[0].y[i]));
      if (err > 1e-4) std::printf("  %s max err %.2e\n", c.name.c_str(), err);
    }
    // size samples ~3 ms
    double est = 0;
    {
      double t0 = now();
      for (size_t i = 0; i < sets; ++i) cands[0].run(M, N, K, S[i].x.data(), S[i].w.data(), S[i].y.data());
      est = (now() - t0) / sets;
    }
    const int runs = std::max<int>(1, (int)std::ceil(3e-3 / est));
    std::vector<std::vector<double>> t(cands.size());
    size_t next = 0;
    for (int r = 0; r < rounds; ++r) {
      std::vector<size_t> order(cands.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t ci : order) {
        // one untimed pass of every set so every candidate sees the same cache state
        const double t0 = now();
        for (int k = 0; k < runs; ++k) {
          Set& s = S[next++ % sets];
          cands[ci].run(M, N, K, s.x.data(), s.w.data(), s.y.data());
        }
        t[ci].push_back((now() - t0) / runs);
      }
    }
    std::printf("N=%d K=%d M=%d sets=%zu runs/sample=%d rounds=%d%s\n", N, K, M, sets, runs, rounds,
                warm ? " WARM" : "");
    for (size_t ci = 0; ci < cands.size(); ++ci)
      std::printf("RESULT %s %d %d %d %.3f\n", cands[ci].name.c_str(), N, K, M, median(t[ci]) * 1e6);
    for (size_t ci = 0; ci < cands.size(); ++ci) {
      std::vector<double> ratio;
      for (int r = 0; r < rounds; ++r) ratio.push_back(t[ci][r] / t[0][r]);
      auto [lo, hi] = median_ci(ratio);
      std::printf("  %-11s %9.1f us   vs %s: %.3f [%.3f, %.3f]\n", cands[ci].name.c_str(),
                  median(t[ci]) * 1e6, cands[0].name.c_str(), median(ratio), lo, hi);
    }
    std::fflush(stdout);
  }
}
