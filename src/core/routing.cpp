// Routing sources (--routing=), one assignment per routing, its statistics and the padding
// arithmetic of vLLM's moe_align_block_size (docs/moe.md).
#include "fusebench/routing.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>
#include <stdexcept>

#include "fusebench/input_files.hpp"

namespace fusebench {

namespace {

// Seeded draws that are the same on every standard library: mt19937_64's sequence is specified
// by the standard, std::uniform_real_distribution and std::normal_distribution are not.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::int64_t below(std::int64_t n) {                                        // [0, n), n > 0
    return static_cast<std::int64_t>(uniform() * static_cast<double>(n));
  }
  double normal() {  // Box-Muller
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 gen_;
};

RoutingAssignment empty_assignment(std::string routing, std::int64_t tokens, std::int64_t experts,
                                   std::int64_t top_k, std::uint64_t seed) {
  if (tokens < 0) throw std::invalid_argument("routing: tokens=" + std::to_string(tokens));
  if (experts <= 0 || top_k <= 0 || top_k > experts)
    throw std::invalid_argument("routing " + routing + ": top_k=" + std::to_string(top_k) +
                                " must be in 1..experts=" + std::to_string(experts));
  RoutingAssignment a;
  a.routing = std::move(routing);
  a.seed = seed;
  a.tokens = tokens;
  a.experts = experts;
  a.top_k = top_k;
  a.expert_ids.resize(static_cast<std::size_t>(tokens * top_k));
  return a;
}

// Positive weights summing to 1 per token (see the header: a permuted weight must show), drawn
// in [0.25, 1.25) so that no slot's contribution all but vanishes.
void random_weights(RoutingAssignment& a, Rng& rng) {
  a.weights.resize(a.expert_ids.size());
  for (std::int64_t t = 0; t < a.tokens; ++t) {
    double sum = 0;
    for (std::int64_t i = 0; i < a.top_k; ++i)
      sum += (a.weights[t * a.top_k + i] = static_cast<float>(0.25 + rng.uniform()));
    for (std::int64_t i = 0; i < a.top_k; ++i)
      a.weights[t * a.top_k + i] = static_cast<float>(a.weights[t * a.top_k + i] / sum);
  }
}

std::string format_double(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

std::vector<std::int64_t> RoutingAssignment::rows_per_expert() const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) out[e] = rows(e);
  return out;
}

void index_by_expert(RoutingAssignment& a) {
  const std::int64_t slots = a.tokens * a.top_k;
  if (static_cast<std::int64_t>(a.expert_ids.size()) != slots)
    throw std::invalid_argument(
        "routing " + a.routing + ": " + std::to_string(a.expert_ids.size()) + " expert ids for " +
        std::to_string(a.tokens) + " tokens x k=" + std::to_string(a.top_k));
  a.expert_offset.assign(static_cast<std::size_t>(a.experts + 1), 0);
  for (std::int64_t t = 0; t < a.tokens; ++t) {
    for (std::int64_t i = 0; i < a.top_k; ++i) {
      const std::int32_t e = a.expert_ids[t * a.top_k + i];
      if (e < 0 || e >= a.experts)
        throw std::invalid_argument("routing " + a.routing + ": token " + std::to_string(t) +
                                    " has expert id " + std::to_string(e) + ", outside 0.." +
                                    std::to_string(a.experts - 1));
      for (std::int64_t j = 0; j < i; ++j) {
        if (a.expert_ids[t * a.top_k + j] == e)
          throw std::invalid_argument("routing " + a.routing + ": token " + std::to_string(t) +
                                      " has expert id " + std::to_string(e) + " twice");
      }
      ++a.expert_offset[e + 1];
    }
  }
  for (std::int64_t e = 0; e < a.experts; ++e) a.expert_offset[e + 1] += a.expert_offset[e];
  a.expert_slots.assign(static_cast<std::size_t>(slots), 0);
  std::vector<std::int64_t> next(a.expert_offset.begin(), a.expert_offset.end() - 1);
  for (std::int64_t s = 0; s < slots; ++s) a.expert_slots[next[a.expert_ids[s]]++] = s;
}

RouterInputs random_router_inputs(const RoutingRule& rule, std::int64_t tokens, std::int64_t hidden,
                                  std::uint64_t seed) {
  // The router (and bias) first: they depend on the seed alone, and token t's hidden state is
  // the same at every M, so one seed routes the first tokens alike across a token sweep.
  Rng rng(seed);
  RouterInputs in;
  in.router_w.resize(static_cast<std::size_t>(rule.experts * hidden));
  const double scale = 1.0 / std::sqrt(static_cast<double>(hidden));
  for (float& x : in.router_w) x = static_cast<float>(rng.normal() * scale);
  if (rule.correction_bias) {
    in.bias.resize(static_cast<std::size_t>(rule.experts));
    for (float& x : in.bias) x = static_cast<float>(0.1 * rng.normal());
  }
  in.hidden_states.resize(static_cast<std::size_t>(tokens * hidden));
  for (float& x : in.hidden_states) x = static_cast<float>(rng.normal());
  return in;
}

std::string RoutingSource::name() const {
  switch (kind) {
    case RoutingKind::router:
      return "router";
    case RoutingKind::uniform:
      return "uniform";
    case RoutingKind::balanced:
      return "balanced";
    case RoutingKind::zipf:
      return "zipf:" + format_double(zipf_s);
    case RoutingKind::file:
      return "file:" + path;
  }
  return "?";
}

RoutingSource parse_routing(std::string_view value) {
  const auto bad = [&](const std::string& why) {
    throw std::invalid_argument("--routing='" + std::string(value) + "': " + why +
                                " (valid: router, uniform, balanced, zipf:S with S > 0, "
                                "file:PATH to a JSON file)");
  };
  RoutingSource s;
  if (value == "router") return s;
  if (value == "uniform") {
    s.kind = RoutingKind::uniform;
  } else if (value == "balanced") {
    s.kind = RoutingKind::balanced;
  } else if (value.rfind("zipf:", 0) == 0) {
    s.kind = RoutingKind::zipf;
    const std::string text(value.substr(5));
    std::size_t used = 0;
    try {
      s.zipf_s = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (text.empty() || used != text.size() || !(s.zipf_s > 0) || !std::isfinite(s.zipf_s))
      bad("the exponent '" + text + "' is not a positive number");
  } else if (value.rfind("file:", 0) == 0) {
    s.kind = RoutingKind::file;
    s.path = std::string(value.substr(5));
    if (s.path.empty()) bad("no path after file:");
  } else {
    bad("unknown routing");
  }
  return s;
}

RoutingAssignment uniform_routing(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                                  std::uint64_t seed) {
  RoutingAssignment a = empty_assignment("uniform", tokens, experts, top_k, seed);
  Rng rng(seed);
  std::vector<std::int32_t> perm(static_cast<std::size_t>(experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t e = 0; e < experts; ++e) perm[e] = static_cast<std::int32_t>(e);
    for (std::int64_t i = 0; i < top_k; ++i) {  // partial Fisher-Yates: k distinct
      std::swap(perm[i], perm[i + rng.below(experts - i)]);
      a.expert_ids[t * top_k + i] = perm[i];
    }
  }
  random_weights(a, rng);
  index_by_expert(a);
  return a;
}

RoutingAssignment balanced_routing(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                                   std::uint64_t seed) {
  RoutingAssignment a = empty_assignment("balanced", tokens, experts, top_k, seed);
  const std::int64_t stride = (experts + top_k - 1) / top_k;
  for (std::int64_t i = 1; i < top_k; ++i) {
    if ((i * stride) % experts == 0)
      throw std::invalid_argument(
          "routing balanced: experts=" + std::to_string(experts) + ", k=" + std::to_string(top_k) +
          ": the stride ceil(E/k)=" + std::to_string(stride) + " gives a token expert " +
          std::to_string(i * stride) + " mod E twice");
  }
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t i = 0; i < top_k; ++i)
      a.expert_ids[t * top_k + i] = static_cast<std::int32_t>((t + i * stride) % experts);
  }
  Rng rng(seed);
  random_weights(a, rng);
  index_by_expert(a);
  return a;
}

RoutingAssignment zipf_routing(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                               double s, std::uint64_t seed) {
  if (!(s > 0) || !std::isfinite(s))
    throw std::invalid_argument("routing zipf: exponent " + format_double(s) + " must be > 0");
  RoutingAssignment a = empty_assignment("zipf:" + format_double(s), tokens, experts, top_k, seed);
  Rng rng(seed);
  // Which expert has which rank: a seeded permutation (hot experts are not always the low ids).
  std::vector<std::int32_t> by_rank(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) by_rank[e] = static_cast<std::int32_t>(e);
  for (std::int64_t i = experts - 1; i > 0; --i) std::swap(by_rank[i], by_rank[rng.below(i + 1)]);
  // Drawn in log space (Gumbel-top-k: the k largest log p_e + G_e, G_e Gumbel, are k draws
  // without replacement by p), where p = rank^-S itself underflows to 0 for all but the first
  // experts at a large S (zipf:1100; zipf:400 at 128 experts). Above S = 1 the keys are divided
  // by S (-log(rank) + G/S, the same order), so they stay finite for any finite S; ties at a huge
  // S go to the lower rank, the limit of the distribution.
  const double rank_scale = std::min(s, 1.0), noise_scale = 1.0 / std::max(s, 1.0);
  std::vector<double> log_rank(static_cast<std::size_t>(experts));
  for (std::int64_t r = 0; r < experts; ++r) log_rank[r] = -rank_scale * std::log(double(r + 1));
  std::vector<std::pair<double, std::int64_t>> keys(static_cast<std::size_t>(experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t r = 0; r < experts; ++r) {
      const double u = std::max(rng.uniform(), 0x1.0p-60);  // (0, 1): log(0) is -inf
      keys[r] = {log_rank[r] - noise_scale * std::log(-std::log(u)), -r};
    }
    std::partial_sort(keys.begin(), keys.begin() + top_k, keys.end(),
                      [](const auto& x, const auto& y) { return x > y; });
    for (std::int64_t i = 0; i < top_k; ++i)
      a.expert_ids[t * top_k + i] = by_rank[static_cast<std::size_t>(-keys[i].second)];
  }
  random_weights(a, rng);
  index_by_expert(a);
  return a;
}

RoutingAssignment file_routing(std::string_view json_text, const std::string& name,
                               std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                               std::uint64_t seed) {
  RoutingAssignment a = empty_assignment("file:" + name, tokens, experts, top_k, seed);
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument("routing file " + name + ": " + what);
  };
  nlohmann::json root;
  try {
    // Bounded depth, and a key given twice refused: JSON would keep the last one silently.
    root = parse_input_json(json_text, "routing file " + name, {.unique_keys = true});
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("not valid JSON (") + e.what() + ")");
  }
  const bool ids = root.is_object() && root.contains("expert_ids");
  const bool counts = root.is_object() && root.contains("tokens_per_expert");
  if (ids == counts)
    fail(
        "needs exactly one of \"expert_ids\" ([[e, ..], ..], k ids per token) or "
        "\"tokens_per_expert\" ([n_0, ..], one count per expert)");
  for (const auto& [key, value] : root.items()) {
    if (key != "expert_ids" && key != "tokens_per_expert")
      fail("unknown key \"" + key +
           "\" (valid: \"expert_ids\" or \"tokens_per_expert\", one of them; a misspelt "
           "field would be ignored)");
  }
  // Read as the file wrote it: 2^64-1 is an unsigned value, and is printed as such, not as -1.
  const auto integer = [&](const nlohmann::json& v, const std::string& where) -> std::int64_t {
    if (!v.is_number_integer()) fail(where + " = " + v.dump() + " is not an integer");
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail(where + " = " + v.dump() + " is out of range (at most " + std::to_string(INT64_MAX) +
           ")");
    return v.get<std::int64_t>();
  };
  if (ids) {
    const auto& list = root.at("expert_ids");
    if (!list.is_array() || list.empty()) fail("\"expert_ids\" must be a non-empty list of lists");
    for (std::size_t row = 0; row < list.size(); ++row) {
      const std::string where = "expert_ids[" + std::to_string(row) + "]";
      if (!list[row].is_array() || static_cast<std::int64_t>(list[row].size()) != top_k)
        fail(where + " = " + list[row].dump() + " does not hold k=" + std::to_string(top_k) +
             " ids");
      for (std::int64_t i = 0; i < top_k; ++i) {
        const std::int64_t e = integer(list[row][i], where + "[" + std::to_string(i) + "]");
        if (e < 0 || e >= experts)
          fail(where + " has expert id " + std::to_string(e) + ", outside 0.." +
               std::to_string(experts - 1));
        for (std::int64_t j = 0; j < i; ++j) {
          if (list[row][j].get<std::int64_t>() == e)
            fail(where + " has expert id " + std::to_string(e) + " twice");
        }
      }
    }
    for (std::int64_t t = 0; t < tokens; ++t) {  // cycled over the M tokens
      const auto& row = list[static_cast<std::size_t>(t) % list.size()];
      for (std::int64_t i = 0; i < top_k; ++i)
        a.expert_ids[t * top_k + i] = static_cast<std::int32_t>(row[i].get<std::int64_t>());
    }
  } else {
    const auto& list = root.at("tokens_per_expert");
    if (!list.is_array() || static_cast<std::int64_t>(list.size()) != experts)
      fail("\"tokens_per_expert\" must list " + std::to_string(experts) +
           " counts, one per expert");
    std::int64_t sum = 0;
    std::vector<std::int64_t> n(static_cast<std::size_t>(experts));
    for (std::int64_t e = 0; e < experts; ++e) {
      const std::string where = "tokens_per_expert[" + std::to_string(e) + "]";
      if (list[e].is_number_unsigned() && list[e].get<std::uint64_t>() > std::uint64_t(tokens))
        fail(where + " = " + list[e].dump() + " is not in 0..M=" + std::to_string(tokens) +
             " (a token takes an expert once)");
      n[e] = integer(list[e], where);
      if (n[e] < 0 || n[e] > tokens)
        fail(where + " = " + list[e].dump() + " is not in 0..M=" + std::to_string(tokens) +
             " (a token takes an expert once)");
      sum += n[e];
    }
    if (sum != tokens * top_k)
      fail("tokens_per_expert sums to " + std::to_string(sum) +
           ", not M*k = " + std::to_string(tokens) + "*" + std::to_string(top_k) + " = " +
           std::to_string(tokens * top_k));
    // Expert e's n_e copies form a run of at most M in the list e0 e0 .. e1 ..; slot j goes to
    // token j mod M, so a run never gives one token an expert twice.
    std::int64_t j = 0;
    for (std::int64_t e = 0; e < experts; ++e) {
      for (std::int64_t c = 0; c < n[e]; ++c, ++j)
        a.expert_ids[(j % tokens) * top_k + j / tokens] = static_cast<std::int32_t>(e);
    }
  }
  Rng rng(seed);
  random_weights(a, rng);
  index_by_expert(a);
  return a;
}

RoutingAssignment make_routing(const RoutingSource& source, const RoutingRule& rule,
                               std::int64_t tokens, std::int64_t hidden, std::uint64_t seed) {
  switch (source.kind) {
    case RoutingKind::router: {
      const RouterInputs in = random_router_inputs(rule, tokens, hidden, seed);
      RoutingAssignment a =
          route_hidden(rule, tokens, hidden, in.hidden_states, in.router_w, in.bias);
      a.seed = seed;
      return a;
    }
    case RoutingKind::uniform:
      return uniform_routing(tokens, rule.experts, rule.top_k, seed);
    case RoutingKind::balanced:
      return balanced_routing(tokens, rule.experts, rule.top_k, seed);
    case RoutingKind::zipf:
      return zipf_routing(tokens, rule.experts, rule.top_k, source.zipf_s, seed);
    case RoutingKind::file: {
      const std::string text = read_input_file(source.path, "the routing file");
      return file_routing(text, source.path, tokens, rule.experts, rule.top_k, seed);
    }
  }
  throw std::logic_error("make_routing: unknown kind");
}

RoutingStats routing_stats(const RoutingAssignment& a) {
  RoutingStats s;
  for (std::int64_t e = 0; e < a.experts; ++e) {
    const std::int64_t n = a.rows(e);
    s.active_experts += n > 0 ? 1 : 0;
    s.max_rows = std::max(s.max_rows, n);
  }
  const double rows = static_cast<double>(a.tokens * a.top_k);
  s.mean_rows = a.experts > 0 ? rows / static_cast<double>(a.experts) : 0;
  s.mean_active_rows = s.active_experts > 0 ? rows / static_cast<double>(s.active_experts) : 0;
  s.max_over_mean = s.mean_rows > 0 ? static_cast<double>(s.max_rows) / s.mean_rows : 0;
  return s;
}

RoutingAssignment make_routing(const RoutingSource& source, const RoutingRule& rule,
                               std::int64_t tokens, std::int64_t hidden, std::uint64_t seed,
                               const RouterWeights& router) {
  if (source.kind != RoutingKind::router) return make_routing(source, rule, tokens, hidden, seed);
  const auto size = [](const std::vector<float>& v) { return static_cast<std::int64_t>(v.size()); };
  if (size(router.router_w) != rule.experts * hidden ||
      size(router.bias) != (rule.correction_bias ? rule.experts : 0)) {
    throw std::invalid_argument(
        "router " + router.name + ": " + std::to_string(router.router_w.size()) +
        " router weights and " + std::to_string(router.bias.size()) + " bias values, expected [" +
        std::to_string(rule.experts) + ", " + std::to_string(hidden) + "] and " +
        (rule.correction_bias ? "[" + std::to_string(rule.experts) + "]" : "none") + " (" +
        rule.family + ": " + std::to_string(rule.experts) + " experts)");
  }
  const RouterInputs in = random_router_inputs(rule, tokens, hidden, seed);
  RoutingAssignment a =
      route_hidden(rule, tokens, hidden, in.hidden_states, router.router_w, router.bias);
  a.seed = seed;
  a.router = router.name;
  return a;
}

nlohmann::json routing_json(const RoutingAssignment& a) {
  const RoutingStats s = routing_stats(a);
  return {{"routing", a.routing},
          {"router", a.routing != "router" ? nlohmann::json(nullptr)
                     : a.router.empty()    ? nlohmann::json("random (seeded)")
                                           : nlohmann::json(a.router)},
          {"seed", a.seed},
          {"tokens", a.tokens},
          {"experts", a.experts},
          {"top_k", a.top_k},
          {"active_experts", s.active_experts},
          {"tokens_per_expert",
           {{"max", s.max_rows},
            {"mean", s.mean_rows},
            {"mean_active", s.mean_active_rows},
            {"max_over_mean", s.max_over_mean}}},
          {"histogram", a.rows_per_expert()}};
}

double expected_active_experts(std::int64_t tokens, std::int64_t experts, std::int64_t top_k) {
  const double E = static_cast<double>(experts);
  return E * (1.0 - std::pow(1.0 - static_cast<double>(top_k) / E, static_cast<double>(tokens)));
}

std::int64_t tokens_all_experts_active(std::int64_t experts, std::int64_t top_k) {
  if (top_k < 1 || top_k > experts)
    throw std::invalid_argument("tokens_all_experts_active: top_k=" + std::to_string(top_k) +
                                " must be in 1.." + std::to_string(experts));
  if (top_k == experts) return 1;
  const double E = static_cast<double>(experts);
  const auto reached = [&](std::int64_t m) {
    return expected_active_experts(m, experts, top_k) >= E - 0.5;
  };
  // (1 - k/E)^M <= 0.5 / E, solved for M; then stepped to the exact smallest M the function
  // itself reaches (the logarithms round).
  auto m = static_cast<std::int64_t>(
      std::ceil(std::log(0.5 / E) / std::log1p(-static_cast<double>(top_k) / E)));
  m = std::max<std::int64_t>(m, 1);
  while (m > 1 && reached(m - 1)) --m;
  while (!reached(m)) ++m;
  return m;
}

std::int64_t vllm_block_size_m(std::int64_t tokens) {
  // (listed M, BLOCK_SIZE_M) of E=128,N=768,device_name=NVIDIA_H200.json.
  static constexpr std::pair<std::int64_t, std::int64_t> kListed[] = {
      {1, 16},   {2, 16},     {4, 16},     {8, 16},     {16, 16},    {24, 16},
      {32, 16},  {48, 16},    {64, 16},    {96, 16},    {128, 16},   {256, 32},
      {512, 64}, {1024, 128}, {1536, 128}, {2048, 128}, {3072, 128}, {4096, 128}};
  const auto* best = &kListed[0];
  for (const auto& row : kListed) {  // strict <: the first (smaller) M wins a tie, as min() does
    if (std::llabs(row.first - tokens) < std::llabs(best->first - tokens)) best = &row;
  }
  return best->second;
}

PaddedRows align_block_rows(const std::vector<std::int64_t>& rows_per_expert, std::int64_t block) {
  if (block <= 0) throw std::invalid_argument("block size " + std::to_string(block) + " <= 0");
  PaddedRows p;
  p.block = block;
  for (std::int64_t n : rows_per_expert) {
    p.rows += (n + block - 1) / block * block;
    p.useful_rows += n;
  }
  p.bound = p.useful_rows + static_cast<std::int64_t>(rows_per_expert.size()) * (block - 1);
  return p;
}

PaddedRows pad_to_largest_rows(const std::vector<std::int64_t>& rows_per_expert) {
  PaddedRows p;
  for (std::int64_t n : rows_per_expert) {
    p.block = std::max(p.block, n);
    p.useful_rows += n;
  }
  p.rows = p.block * static_cast<std::int64_t>(rows_per_expert.size());
  p.bound = p.rows;
  return p;
}

double rows_flops(std::int64_t rows,
                  const std::vector<std::pair<std::int64_t, std::int64_t>>& gemms) {
  double flops = 0;
  for (const auto& [n, k] : gemms)
    flops += 2.0 * static_cast<double>(rows) * static_cast<double>(n) * static_cast<double>(k);
  return flops;
}

nlohmann::json moe_json(const MoeRouting& moe) {
  nlohmann::json j = {{"routing", routing_json(moe.assignment)}};
  if (moe.padded.block > 0) {
    const auto& p = moe.padded;
    j["padding"] = {
        {"block_size", p.block},
        {"rows", p.rows},
        {"useful_rows", p.useful_rows},
        {"wasted_rows", p.wasted_rows()},
        {"wasted_fraction",
         p.rows > 0 ? static_cast<double>(p.wasted_rows()) / static_cast<double>(p.rows) : 0.0},
        {"padding_flops", moe.padding_flops}};
  }
  const RoutingAssignment& a = moe.assignment;
  j["uniform"] = {
      {"expected_active_experts", expected_active_experts(a.tokens, a.experts, a.top_k)},
      {"tokens_all_experts_active", tokens_all_experts_active(a.experts, a.top_k)}};
  return j;
}

bool routing_fixes_tokens(const RoutingSource& source) {
  if (source.kind != RoutingKind::file) return false;
  try {
    const nlohmann::json root =
        parse_input_json(read_input_file(source.path, "the routing file"), "routing file");
    return root.is_object() && root.contains("tokens_per_expert");
  } catch (const std::exception&) {
    return false;  // make_routing names what is wrong with it
  }
}

std::shared_ptr<const MoeBlock> file_routing_as_uniform(
    const std::shared_ptr<const MoeBlock>& block) {
  if (!block || block->source.kind != RoutingKind::file) return block;
  auto uniform = std::make_shared<MoeBlock>(*block);
  uniform->source = RoutingSource{RoutingKind::uniform};
  return uniform;
}

RoutingAssignment token_window(const RoutingAssignment& a, std::int64_t row0, std::int64_t rows) {
  if (row0 < 0 || rows < 0 || row0 + rows > a.tokens)
    throw std::invalid_argument("token_window: rows [" + std::to_string(row0) + ", " +
                                std::to_string(row0 + rows) + ") of a routing of " +
                                std::to_string(a.tokens) + " tokens");
  RoutingAssignment w = empty_assignment(a.routing, rows, a.experts, a.top_k, a.seed);
  w.router = a.router;
  const auto first = static_cast<std::ptrdiff_t>(row0 * a.top_k);
  const auto last = static_cast<std::ptrdiff_t>((row0 + rows) * a.top_k);
  w.expert_ids.assign(a.expert_ids.begin() + first, a.expert_ids.begin() + last);
  w.weights.assign(a.weights.begin() + first, a.weights.begin() + last);
  index_by_expert(w);
  return w;
}

}  // namespace fusebench
