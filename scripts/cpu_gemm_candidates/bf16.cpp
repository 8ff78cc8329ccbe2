// bf16 candidates: Y[M,N] = X W^T, bf16 in, fp32 accumulate, bf16 out; same rotation as fp32.cpp.
//   usage: bf16 N K M1,M2,... rounds widen_sgemm,dnnl_matmul   (env as in fp32.cpp)
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>
using u16 = std::uint16_t;
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
using sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using sbgemm_t = void (*)(int, int, int, int, int, int, float, const u16*, int, const u16*, int, float, float*, int);
float b2f(u16 b) { std::uint32_t u = (std::uint32_t)b << 16; float f; std::memcpy(&f, &u, 4); return f; }
u16 f2b(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return (u16)(u >> 16); }
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double median(std::vector<double> v) { std::sort(v.begin(), v.end()); size_t n = v.size(); return n % 2 ? v[n/2] : 0.5*(v[n/2-1]+v[n/2]); }
std::pair<double,double> ci(std::vector<double> v) { std::sort(v.begin(), v.end()); int n=v.size(); double h=1.96*std::sqrt(n)/2; return {v[std::max(0,(int)std::floor(n/2.0-h))], v[std::min(n-1,(int)std::ceil(n/2.0+h)-1)]}; }
int main(int argc, char** argv) {
  const int N = std::atoi(argv[1]), K = std::atoi(argv[2]);
  std::vector<int> Ms; for (char* s = std::strtok(argv[3], ","); s; s = std::strtok(nullptr, ",")) Ms.push_back(std::atoi(s));
  const int rounds = std::atoi(argv[4]);
  std::vector<std::string> names; for (char* s = std::strtok(argv[5], ","); s; s = std::strtok(nullptr, ",")) names.push_back(s);
  void* hd = dlopen("/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", RTLD_NOW|RTLD_LOCAL|RTLD_DEEPBIND);
  auto deb_sgemm = (sgemm_t)dlsym(hd, "cblas_sgemm");
  // scipy-openblas32 0.3.34 declares cblas_sbgemm in its header but does not export it.
  sbgemm_t sci_sbgemm = nullptr;
  if (void* hs = std::getenv("SCIPY_OPENBLAS") ? dlopen(std::getenv("SCIPY_OPENBLAS"), RTLD_NOW|RTLD_LOCAL|RTLD_DEEPBIND) : nullptr)
    sci_sbgemm = (sbgemm_t)dlsym(hs, "scipy_cblas_sbgemm");
  if (const char* t = std::getenv("CAND_THREADS"))
    ((void(*)(int))dlsym(hd, "openblas_set_num_threads"))(std::atoi(t));
  dnnl::engine eng(dnnl::engine::kind::cpu, 0); dnnl::stream strm(eng);
  std::map<int, std::pair<dnnl::matmul, std::array<dnnl::memory::desc,3>>> prims;
  std::vector<float> scratch, xf, wf;
  using F = std::function<void(int, const u16*, const u16*, u16*)>;
  std::map<std::string, F> all = {
    {"widen_sgemm", [&](int M, const u16* x, const u16* w, u16* y) {
       xf.resize((size_t)M*K); wf.resize((size_t)N*K); scratch.resize((size_t)M*N);
       for (size_t i = 0; i < xf.size(); ++i) xf[i] = b2f(x[i]);
       for (size_t i = 0; i < wf.size(); ++i) wf[i] = b2f(w[i]);
       deb_sgemm(RowMajor, NoTrans, Trans, M, N, K, 1, xf.data(), K, wf.data(), K, 0, scratch.data(), N);
       for (size_t i = 0; i < scratch.size(); ++i) y[i] = f2b(scratch[i]); }},
    {"sci_sbgemm", [&](int M, const u16* x, const u16* w, u16* y) {
       if (!sci_sbgemm) { std::fprintf(stderr, "no scipy_cblas_sbgemm in SCIPY_OPENBLAS\n"); std::exit(1); }
       scratch.resize((size_t)M*N);
       sci_sbgemm(RowMajor, NoTrans, Trans, M, N, K, 1, x, K, w, K, 0, scratch.data(), N);
       for (size_t i = 0; i < scratch.size(); ++i) y[i] = f2b(scratch[i]); }},
    {"dnnl_matmul", [&](int M, const u16* x, const u16* w, u16* y) {
       auto it = prims.find(M);
       if (it == prims.end()) {
         using dt = dnnl::memory::data_type;
         dnnl::memory::desc s({M, K}, dt::bf16, dnnl::memory::dims{K, 1}), wd({K, N}, dt::bf16, dnnl::memory::dims{1, K}), d({M, N}, dt::bf16, dnnl::memory::dims{N, 1});
         dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(s, wd, d), eng);
         std::printf("  bf16 matmul impl M=%d: %s\n", M, pd.impl_info_str());
         it = prims.emplace(M, std::make_pair(dnnl::matmul(pd), std::array<dnnl::memory::desc,3>{s, wd, d})).first;
       }
       auto& [p, ds] = it->second;
       dnnl::memory ms(ds[0], eng, (void*)x), mw(ds[1], eng, (void*)w), md(ds[2], eng, y);
       p.execute(strm, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}}); strm.wait(); }},
  };
  std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1, 1);
  for (int M : Ms) {
    const size_t set_bytes = 2ull * ((size_t)M*K + (size_t)N*K + (size_t)M*N);
    const size_t cache = 402653184, budget = 256ull << 20;
    size_t sets = set_bytes < 2*cache ? std::min((2*cache + set_bytes - 1)/set_bytes + 1, std::max<size_t>(1, budget/set_bytes)) : 1;
    struct Set { std::vector<u16> x, w, y; };
    std::vector<Set> S(sets);
    S[0].x.resize((size_t)M*K); S[0].w.resize((size_t)N*K);
    for (auto& v : S[0].x) v = f2b(u(rng)); for (auto& v : S[0].w) v = f2b(u(rng)/32);
    for (size_t i = 0; i < sets; ++i) { if (i) { S[i].x = S[0].x; S[i].w = S[0].w; } S[i].y.assign((size_t)M*N, 0); }
    std::vector<u16> ref((size_t)M*N);
    all[names[0]](M, S[0].x.data(), S[0].w.data(), ref.data());
    for (auto& n : names) { all[n](M, S[0].x.data(), S[0].w.data(), S[0].y.data());
      double e = 0; for (size_t i = 0; i < ref.size(); ++i) e = std::max(e, (double)std::fabs(b2f(ref[i]) - b2f(S[0].y[i]))); if (e > 2e-2) std::printf("  %s err %.3g\n", n.c_str(), e); }
    double t0 = now(); for (size_t i = 0; i < sets; ++i) all[names[0]](M, S[i].x.data(), S[i].w.data(), S[i].y.data());
    const int runs = std::max(1, (int)std::ceil(3e-3 / ((now() - t0)/sets)));
    std::vector<std::vector<double>> t(names.size()); size_t next = 0;
    for (int r = 0; r < rounds; ++r) {
      std::vector<size_t> order(names.size()); for (size_t i = 0; i < order.size(); ++i) order[i] = i; std::shuffle(order.begin(), order.end(), rng);
      for (size_t c : order) { double a = now(); for (int k = 0; k < runs; ++k) { Set& s = S[next++ % sets]; all[names[c]](M, s.x.data(), s.w.data(), s.y.data()); } t[c].push_back((now()-a)/runs); }
    }
    std::printf("bf16 N=%d K=%d M=%d sets=%zu rounds=%d\n", N, K, M, sets, rounds);
    for (size_t c = 0; c < names.size(); ++c) { std::vector<double> q; for (int r = 0; r < rounds; ++r) q.push_back(t[c][r]/t[0][r]); auto [lo, hi] = ci(q);
      std::printf("  %-12s %9.1f us  vs %s: %.3f [%.3f, %.3f]\n", names[c].c_str(), median(t[c])*1e6, names[0].c_str(), median(q), lo, hi); }
    std::fflush(stdout);
  }
}
