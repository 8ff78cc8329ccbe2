// The decisions (docs/advise.md): per comparison and measured token count, pool every report's
// paired ratios (6+ runs: the median's order-statistic interval; fewer: the hull), decide `use:`,
// `either` or `unresolved` against the margin, then place the ranges between measured token counts
// (the cost model's crossover where it agrees with both neighbours, else the measured point).
#include "fusebench/advise.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "fusebench/ep_advice.hpp"
#include "fusebench/identity.hpp"

namespace fusebench::advise {
namespace {

// Variants in the order the suite lists them (the baseline goes first in any case).
const std::vector<std::string>& variant_order() {
  static const std::vector<std::string> order = {"split",
                                                 "fused",
                                                 "fused_channelwise",
                                                 "grouped",
                                                 "batched",
                                                 "fused_bias_kernel",
                                                 "per_expert",
                                                 "per_expert_split",
                                                 "padded",
                                                 "naive",
                                                 "paired",
                                                 "sp",
                                                 "overlap"};
  return order;
}

std::string default_baseline(const std::string& op) {
  if (op == "qkv" || op == "gate_up") return "split";
  if (op == "tp_attn" || op == "tp_mlp") return "naive";
  if (op == "moe") return "per_expert";
  return "";
}

std::string fmt(double v, const char* spec = "%.3f") {
  char buf[48];
  std::snprintf(buf, sizeof(buf), spec, v);
  return buf;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

enum class Pair { kBeats, kLoses, kWithin, kUndecided };

Pair classify(double low, double high, double margin) {
  if (low > 1 + margin) return Pair::kBeats;
  if (high < 1 / (1 + margin)) return Pair::kLoses;
  if (low >= 1 / (1 + margin) && high <= 1 + margin) return Pair::kWithin;
  return Pair::kUndecided;
}

Pair flip(Pair p) {
  return p == Pair::kBeats ? Pair::kLoses : p == Pair::kLoses ? Pair::kBeats : p;
}

struct Verdict {
  Decision decision = Decision::kUnresolved;
  std::vector<std::string> variants;
  std::string label = "unresolved";
};

// status(i, j): variant i against variant j. A single winner; else a tied set that beats all
// the others (unique when it exists); else unresolved.
template <class Status>
Verdict decide(const std::vector<std::string>& vars, Status status) {
  Verdict v;
  const std::size_t k = vars.size();
  if (k < 2) return v;
  for (std::size_t i = 0; i < k; ++i) {
    bool all = true;
    for (std::size_t j = 0; j < k && all; ++j) all = i == j || status(i, j) == Pair::kBeats;
    if (all) {
      v.decision = Decision::kUse;
      v.variants = {vars[i]};
      v.label = "use: " + vars[i];
      return v;
    }
  }
  if (k > 12) return v;
  for (unsigned mask = 1; mask < (1u << k); ++mask) {
    if (__builtin_popcount(mask) < 2) continue;
    bool ok = true;
    for (std::size_t i = 0; i < k && ok; ++i) {
      for (std::size_t j = 0; j < k && ok; ++j) {
        if (i == j || !(mask >> i & 1)) continue;
        ok = status(i, j) == ((mask >> j & 1) ? Pair::kWithin : Pair::kBeats);
      }
    }
    if (!ok) continue;
    v.decision = Decision::kEither;
    for (std::size_t i = 0; i < k; ++i) {
      if (mask >> i & 1) v.variants.push_back(vars[i]);
    }
    v.label = v.variants.size() == k ? "either" : "either: " + join(v.variants, ", ");
    return v;
  }
  return v;
}

const char* state_name(Pair p) {
  switch (p) {
    case Pair::kBeats:
      return "beats";
    case Pair::kLoses:
      return "loses";
    case Pair::kWithin:
      return "within";
    case Pair::kUndecided:
      return "straddles";
  }
  return "?";
}

// The rank j of the order-statistic 95% interval [x_(j), x_(n+1-j)] of a median of n values:
// the largest j with 2 P(Binomial(n, 1/2) < j) <= 5%; 0 when none (n < 6).
int median_interval_rank(std::size_t n) {
  // Binomial terms in log space: 0.5^n underflows beyond about 1074 values.
  const double N = static_cast<double>(n);
  double tail = 0;
  int j = 0;
  for (std::size_t k = 0; 2 * k < n; ++k) {
    const double K = static_cast<double>(k);
    tail += std::exp(std::lgamma(N + 1) - std::lgamma(K + 1) - std::lgamma(N - K + 1) -
                     N * std::log(2.0));  // P(X <= k)
    if (2 * tail > 0.05) break;
    j = static_cast<int>(k) + 1;
  }
  return j;
}

// Pools the observations `usable` admits. With 6 or more runs: the median of their speedups and
// its order-statistic 95% interval, which holds the run-to-run drift no single run's interval
// sees; with fewer: the hull of their intervals. Each run's speedup lies in its own interval, so
// the pooled interval lies inside the hull: where every run decides alike, the pool does too,
// and more runs never give less advice than the hull (issue 28).
void pool(PairEvidence& p, double margin, bool accept_modelled) {
  std::vector<double> speedups;
  p.has_interval = false;
  p.pairs = 0;
  double max_low = 0, min_high = 0;
  for (const auto& o : p.observations) {
    const bool usable = o.excluded.empty() ||
                        (accept_modelled && o.modelled && o.excluded.rfind("modelled", 0) == 0 &&
                         o.excluded.find(';') == std::string::npos);
    if (!usable) continue;
    speedups.push_back(o.ratio.speedup);
    if (!p.has_interval) {
      p.low = *o.ratio.low, p.high = *o.ratio.high;
      max_low = p.low, min_high = p.high;
    } else {
      p.low = std::min(p.low, *o.ratio.low), p.high = std::max(p.high, *o.ratio.high);
      max_low = std::max(max_low, *o.ratio.low), min_high = std::min(min_high, *o.ratio.high);
    }
    p.has_interval = true;
    p.pairs += o.ratio.pairs.value_or(0);
  }
  p.note.clear();
  p.pooling.clear();
  if (!p.has_interval) {
    p.state = "no evidence";
    return;
  }
  std::sort(speedups.begin(), speedups.end());
  const std::size_t n = speedups.size();
  p.speedup = n % 2 ? speedups[n / 2] : 0.5 * (speedups[n / 2 - 1] + speedups[n / 2]);
  if (const int j = median_interval_rank(n); j > 0) {
    p.low = speedups[static_cast<std::size_t>(j - 1)];
    p.high = speedups[n - static_cast<std::size_t>(j)];
    p.pooling = "median of " + std::to_string(n) + " runs, order-statistic 95% interval";
  } else if (n > 1) {
    p.pooling = "hull of " + std::to_string(n) + " runs' intervals";
  }
  p.state = state_name(classify(p.low, p.high, margin));
  if (max_low > min_high) p.note = "the reports' intervals do not overlap (the runs disagree)";
}

Pair pair_status(const PairEvidence& p, double margin) {
  return p.has_interval ? classify(p.low, p.high, margin) : Pair::kUndecided;
}

std::string evidence_text(const PairEvidence& p, double margin) {
  std::string s = p.variant + " over " + p.over;
  if (!p.has_interval) {
    std::set<std::string> why;
    for (const auto& o : p.observations) why.insert(o.excluded);
    return s + ": no evidence (" +
           (why.empty() ? "not measured together" : join({why.begin(), why.end()}, "; ")) + ")";
  }
  s += " " + fmt(p.speedup) + " [" + fmt(p.low) + ", " + fmt(p.high) + "]";
  if (!p.pooling.empty()) s += " (" + p.pooling + ")";
  const std::string hi = fmt(1 + margin), lo = fmt(1 / (1 + margin));
  switch (classify(p.low, p.high, margin)) {
    case Pair::kBeats:
      s += " > " + hi;
      break;
    case Pair::kLoses:
      s += " < " + lo;
      break;
    case Pair::kWithin:
      s += " within [" + lo + ", " + hi + "]";
      break;
    case Pair::kUndecided:
      s += " straddles the margin [" + lo + ", " + hi + "]";
      break;
  }
  if (!p.note.empty()) s += " (" + p.note + ")";
  return s;
}

// The ratio of v over w in one report cell, read from either entry.
std::optional<std::pair<Ratio, bool>> ratio_of(const Entry& v, const Entry& w) {
  if (v.speedup && v.speedup_baseline == w.variant) return std::pair{*v.speedup, false};
  if (const auto it = v.over.find(w.variant); it != v.over.end())
    return std::pair{it->second, false};
  const Ratio* r = nullptr;
  if (w.speedup && w.speedup_baseline == v.variant) {
    r = &*w.speedup;
  } else if (const auto it = w.over.find(v.variant); it != w.over.end()) {
    r = &it->second;
  }
  if (!r) return std::nullopt;
  Ratio inv;
  inv.speedup = 1 / r->speedup;
  if (r->low && r->high) inv.low = 1 / *r->high, inv.high = 1 / *r->low;
  inv.pairs = r->pairs;
  return std::pair{inv, true};
}

std::string not_evidence(const Entry& v, const Entry& w, const Ratio& r) {
  // The shared "not judged" contract (fusebench/evidence.hpp) decides; the words are the advisor's.
  std::vector<std::string> why;
  for (const Entry* e : {&v, &w}) {
    if (not_judged(e->timing_stop, {}).kind == NotJudged::Kind::kContended) {
      std::string s = "contended (" + e->variant + ": timing_stop contended";
      if (e->samples_dropped_preempted) {
        s += ", " + fmt(*e->samples_dropped_preempted, "%.0f") + " samples dropped preempted";
      }
      why.push_back(s + ")");
      break;
    }
  }
  const std::string& note = !v.speedup_ci_note.empty() ? v.speedup_ci_note : w.speedup_ci_note;
  const std::optional<double> pairs =
      r.pairs ? std::optional<double>(*r.pairs) : std::optional<double>();
  if (!r.pairs) {
    why.push_back("no interval: the report gives no pair count");
  } else if (not_judged("", {{"pairs", pairs}})) {
    std::string s = "no interval: " + std::to_string(*r.pairs) + " pairs < " +
                    std::to_string(kMinIntervalValues);
    if (!note.empty()) s += " (" + note + ")";
    why.push_back(s);
  } else if (!r.low || !r.high) {
    std::string s = "no interval";
    if (!note.empty()) s += " (" + note + ")";
    why.push_back(s);
  }
  return join(why, "; ");
}

struct Cell {
  std::map<std::string, const Entry*> by_variant;
};

std::vector<std::string> order_variants(const std::set<std::string>& vars,
                                        const std::string& baseline) {
  std::vector<std::string> out;
  if (vars.count(baseline)) out.push_back(baseline);
  for (const auto& v : variant_order()) {
    if (v != baseline && vars.count(v)) out.push_back(v);
  }
  for (const auto& v : vars) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

Verdict model_verdict(const std::vector<std::string>& vars,
                      const std::map<std::string, double>& secs, double margin) {
  return decide(vars, [&](std::size_t i, std::size_t j) {
    const double r = secs.at(vars[j]) / secs.at(vars[i]);
    return classify(r, r, margin);
  });
}

double model_seconds(const std::array<double, 3>& c, const Ceilings& ceil, double overhead) {
  return std::max(c[0] / ceil.peak_flops, c[1] / ceil.bandwidth) + c[2] * overhead;
}

struct Segment {
  std::int64_t low, high;
  Verdict verdict;
};

// The cost model between two measured neighbours: segments of its decision over every token
// count strictly between them, or nullopt with why it is not used.
std::optional<std::vector<Segment>> model_gap(const Comparison& c, const Point& a, const Point& b,
                                              double margin, std::string& why) {
  if (!c.ceilings) {
    const std::string prefix = "not evaluated: ";
    why = "no cost model (" +
          (c.model_note.rfind(prefix, 0) == 0 ? c.model_note.substr(prefix.size()) : c.model_note) +
          ")";
    return std::nullopt;
  }
  if (!a.model || !b.model) {
    why = "the cost model is not evaluated at " + std::to_string(a.model ? b.tokens : a.tokens) +
          " tokens (model counters missing)";
    return std::nullopt;
  }
  std::vector<std::string> disagree;
  if (a.model->label != a.label) {
    disagree.push_back("it predicts " + a.model->label + " at " + std::to_string(a.tokens) +
                       " tokens, measured " + a.label);
  }
  if (b.model->label != b.label) {
    disagree.push_back("it predicts " + b.model->label + " at " + std::to_string(b.tokens) +
                       " tokens, measured " + b.label);
  }
  if (!disagree.empty()) {
    why = "the cost model disagrees (" + join(disagree, "; ") + ")";
    return std::nullopt;
  }
  if (a.variants.empty() || a.model->counters.size() != b.model->counters.size()) {
    why = "the two token counts measured different variants";
    return std::nullopt;
  }
  std::vector<std::string> vars;
  for (const auto& [v, counters] : a.model->counters) {
    const auto it = b.model->counters.find(v);
    if (it == b.model->counters.end() || it->second[2] != counters[2]) {
      why = "the cost model's launches of " + v + " differ between the neighbours";
      return std::nullopt;
    }
    vars.push_back(v);
  }
  std::vector<std::string> ordered;
  for (const auto& v : c.variants) {
    if (std::find(vars.begin(), vars.end(), v) != vars.end()) ordered.push_back(v);
  }
  if (b.tokens - a.tokens > (std::int64_t{1} << 22)) {
    why = "the gap between the measured token counts is too wide to scan";
    return std::nullopt;
  }
  std::vector<Segment> segs;
  const double t0 = static_cast<double>(a.tokens), t1 = static_cast<double>(b.tokens);
  for (std::int64_t m = a.tokens + 1; m < b.tokens; ++m) {
    // FLOPs and bytes of a plan are affine in the token count (2MNK; MK + NK + MN, ...): the
    // neighbours' counters give them exactly at every M between.
    const double f = (static_cast<double>(m) - t0) / (t1 - t0);
    std::map<std::string, double> secs;
    for (const auto& v : ordered) {
      const auto& ca = a.model->counters.at(v);
      const auto& cb = b.model->counters.at(v);
      const std::array<double, 3> cm = {ca[0] + f * (cb[0] - ca[0]), ca[1] + f * (cb[1] - ca[1]),
                                        ca[2]};
      secs[v] = model_seconds(cm, *c.ceilings, c.launch_overhead_s);
    }
    Verdict v = model_verdict(ordered, secs, margin);
    if (!segs.empty() && segs.back().verdict.label == v.label) {
      segs.back().high = m;
    } else {
      segs.push_back({m, m, v});
    }
  }
  return segs;
}

std::string tokens_text(std::int64_t t) { return std::to_string(t); }

void place_ranges(Comparison& c, double margin) {
  c.ranges.clear();
  if (c.points.empty()) return;
  auto open = [&](const Point& p, const std::string& low_end) {
    Range r;
    r.low = r.high = p.tokens;
    r.decision = p.decision;
    r.variants = p.variants;
    r.label = p.label;
    r.basis = "measured";
    r.low_end = low_end;
    r.reason = p.reason;
    r.points = {p.tokens};
    c.ranges.push_back(r);
  };
  open(c.points.front(), "the smallest measured token count");
  for (std::size_t i = 1; i < c.points.size(); ++i) {
    const Point& a = c.points[i - 1];
    const Point& b = c.points[i];
    Range* cur = &c.ranges.back();
    if (b.label == a.label && b.label == cur->label) {
      cur->high = b.tokens;
      cur->points.push_back(b.tokens);
      if (cur->reason != b.reason) cur->reason = "";  // per point in the evidence
      continue;
    }
    if (b.tokens == a.tokens + 1) {
      cur->high_end = "measured point (the next token count is measured)";
      open(b, "measured point (the previous token count is measured)");
      continue;
    }
    std::string why;
    const auto segs = model_gap(c, a, b, margin, why);
    if (segs) {
      const std::string agree = "the cost model agrees with both neighbours (" +
                                tokens_text(a.tokens) + ": " + a.label + ", " +
                                tokens_text(b.tokens) + ": " + b.label + ")";
      for (const auto& s : *segs) {
        cur = &c.ranges.back();
        if (s.verdict.label == cur->label) {
          cur->high = s.high;
          continue;
        }
        const std::string at = "cost model crossover between " + tokens_text(s.low - 1) + " and " +
                               tokens_text(s.low) + " tokens; " + agree;
        cur->high_end = at;
        Range r;
        r.low = s.low;
        r.high = s.high;
        r.decision = s.verdict.decision;
        r.variants = s.verdict.variants;
        r.label = s.verdict.label;
        r.basis = "cost model";
        r.low_end = at;
        r.reason = "the cost model's decision between the measured " + tokens_text(a.tokens) +
                   " and " + tokens_text(b.tokens) + " tokens";
        c.ranges.push_back(r);
      }
      cur = &c.ranges.back();
      if (cur->label == b.label) {
        cur->high = b.tokens;
        cur->points.push_back(b.tokens);
        if (cur->basis != "measured") {
          cur->basis = "measured";
          cur->reason = b.reason;
        }
      } else {
        const std::string at = "cost model crossover between " + tokens_text(b.tokens - 1) +
                               " and " + tokens_text(b.tokens) + " tokens; " + agree;
        cur->high_end = at;
        open(b, at);
      }
      continue;
    }
    cur->high_end = "measured point (" + why + ")";
    if (b.tokens > a.tokens + 1) {
      Range gap;
      gap.low = a.tokens + 1;
      gap.high = b.tokens - 1;
      gap.label = "unresolved";
      gap.basis = "not measured";
      gap.low_end = "after the measured " + tokens_text(a.tokens) + " tokens";
      gap.high_end = "before the measured " + tokens_text(b.tokens) + " tokens";
      gap.reason = "not measured: between " + tokens_text(a.tokens) + " (" + a.label + ") and " +
                   tokens_text(b.tokens) + " (" + b.label + "); " + why;
      c.ranges.push_back(gap);
    }
    open(b, "measured point (" + why + ")");
  }
  c.ranges.back().high_end = "the largest measured token count";
}

}  // namespace

const char* to_string(Decision d) {
  switch (d) {
    case Decision::kUse:
      return "use";
    case Decision::kEither:
      return "either";
    case Decision::kUnresolved:
      return "unresolved";
  }
  return "?";
}

std::string Key::text() const {
  std::string s = op + " model:" + model;
  if (!layer.empty()) s += " layer:" + layer;
  s += " dtype:" + dtype + " tp:" + std::to_string(tp);
  if (!timing.empty()) s += " timing:" + timing;
  if (!weights.empty()) s += " weights:" + weights;
  if (!comm.empty()) s += " comm:" + comm;
  return s + " on " + device + (backend.empty() ? "" : " (" + backend + ")");
}

const Point* Comparison::point(std::int64_t tokens) const {
  for (const auto& p : points) {
    if (p.tokens == tokens) return &p;
  }
  return nullptr;
}

namespace {

// Reports of one device are pooled only when they ran one setup: a thread count, library or build
// that differs changes the speedups (the gate refuses to compare such reports too).
void refuse_mixed_setups(const std::vector<Report>& reports) {
  for (std::size_t i = 0; i < reports.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (reports[i].device != reports[j].device) continue;  // kept apart anyway
      for (const auto& f : compare_identity(reports[j].context, reports[i].context)) {
        if (f.name == "device" || f.name == "backend") continue;
        if (!(f.timing || f.name == "threads") || !f.differs()) continue;
        throw InputError(reports[i].file + ": " + f.source + ": " + f.current + ", but " +
                         reports[j].file + " has " + f.baseline + " (" + f.name +
                         "): reports of one device are pooled only when they ran one setup; "
                         "advise them separately");
      }
    }
  }
}

}  // namespace

namespace {

// The moe op's routing is part of what an entry measured, but not of its name: reports pooled
// must have routed alike (the same --routing and --seed), or their speedups mix experiments.
// A quantized entry's quant.spec likewise (the gate refuses such a pair as well).
void refuse_mixed_routing(const std::vector<Report>& reports) {
  std::map<std::string, std::pair<std::string, const Report*>> seen;   // name -> routing, report
  std::map<std::string, std::pair<std::string, const Report*>> specs;  // name -> spec, report
  for (const auto& r : reports) {
    for (const auto& e : r.entries) {
      if (!e.quant_spec.empty()) {
        const auto [it, added] = specs.try_emplace(e.name, e.quant_spec, &r);
        if (!added && it->second.first != e.quant_spec)
          throw InputError(r.file + ": " + e.name + ": quant.spec: " + e.quant_spec + ", but " +
                           it->second.second->file + " has " + it->second.first +
                           ": reports are pooled only when they quantized alike (the same "
                           "--dtypes); advise them separately");
      }
      if (e.routing.empty()) continue;
      const auto [it, added] = seen.try_emplace(e.name, e.routing, &r);
      if (added || it->second.first == e.routing) continue;
      throw InputError(r.file + ": " + e.name + ": moe.routing: " + e.routing + ", but " +
                       it->second.second->file + " has " + it->second.first +
                       ": reports are pooled only when they routed alike (the same --routing and "
                       "--seed); advise them separately");
    }
  }
}

// Accuracy per variant against the comparison's baseline, shard by shard at the same token count
// and run (docs/advise.md, "Accuracy").
template <class Groups>
void add_accuracy(Comparison& c, const Groups& by_tokens) {
  for (const auto& [tokens, cells] : by_tokens) {
    for (const auto& [rr, cell] : cells) {
      const auto base = cell.by_variant.find(c.baseline);
      for (const auto& [v, e] : cell.by_variant) {
        c.emulated = c.emulated || e->emulated;
        if (e->header.error || e->quant_error().empty()) continue;
        VariantAccuracy& a = c.accuracy[v];
        for (const auto& [shard, err] : e->quant_error()) {
          if (err > a.worst || a.worst_shard.empty())
            a.worst = err, a.worst_shard = shard, a.worst_tokens = tokens;
          if (base == cell.by_variant.end() || v == c.baseline || base->second->header.error)
            continue;
          const auto b = base->second->quant_error().find(shard);
          if (b == base->second->quant_error().end()) continue;
          if (err - b->second > a.growth) {
            a.growth = err - b->second, a.growth_from = b->second, a.growth_shard = shard;
            a.growth_tokens = tokens;
          }
        }
        for (const auto& [shard, err] : e->quant_error_vs_split())
          a.vs_split = std::max(a.vs_split.value_or(0), err);
        a.less_accurate =
            a.growth > kLessAccurateAbsolute && a.growth > kLessAccurateRelative * a.growth_from;
      }
    }
  }
}

}  // namespace

std::string accuracy_caveat(const Comparison& c, const std::string& variant) {
  const auto it = c.accuracy.find(variant);
  if (it == c.accuracy.end() || !it->second.less_accurate) return "";
  const VariantAccuracy& a = it->second;
  std::string s = variant + " is less accurate than " + c.baseline + ": quant_error of shard " +
                  a.growth_shard + " " + fmt(a.growth_from + a.growth, "%.4g") + " vs " +
                  fmt(a.growth_from, "%.4g");
  if (a.growth_from > 0) s += " (+" + fmt(100 * a.growth / a.growth_from, "%.1f") + "%)";
  s += " at " + std::to_string(a.growth_tokens) + " tokens";
  if (a.vs_split) s += "; quant_error_vs_split up to " + fmt(*a.vs_split, "%.4g");
  return s;
}

std::string accuracy_summary(const Comparison& c) {
  std::string s;
  for (const auto& v : c.variants) {
    const auto it = c.accuracy.find(v);
    if (it == c.accuracy.end()) continue;
    const VariantAccuracy& a = it->second;
    s +=
        (s.empty() ? "" : "; ") + v + " " + fmt(a.worst, "%.4g") + " (shard " + a.worst_shard + ")";
    if (a.vs_split) s += ", vs split " + fmt(*a.vs_split, "%.4g");
    if (a.less_accurate) s += ", less accurate than " + c.baseline;
  }
  return s;
}

namespace {

// The ranges' accuracy caveats: each variant a range runs that is less accurate than the
// baseline says so beside the decision.
void add_range_accuracy(Comparison& c) {
  for (auto& r : c.ranges) {
    if (r.decision == Decision::kUnresolved) continue;
    std::vector<std::string> caveats;
    for (const auto& v : r.variants) {
      if (auto s = accuracy_caveat(c, v); !s.empty()) caveats.push_back(s);
    }
    r.accuracy = join(caveats, "; ");
  }
}

}  // namespace

namespace {

// (report, repetition) -> variant -> entry, per token count, per comparison key.
using Cells = std::map<std::pair<int, int>, Cell>;
using ByTokens = std::map<std::int64_t, Cells>;

std::map<Key, ByTokens> group_entries(const std::vector<Report>& reports) {
  std::map<Key, ByTokens> groups;
  for (std::size_t ri = 0; ri < reports.size(); ++ri) {
    for (const auto& e : reports[ri].entries) {
      Key k{reports[ri].device, e.backend, e.model, e.layer, e.op, e.dtype,
            e.timing,           e.weights, e.comm,  e.tp};
      groups[k][e.tokens][{static_cast<int>(ri), e.repetition}].by_variant[e.variant] = &e;
    }
  }
  return groups;
}

// The comparison's variants (baseline first: the one most entries name, else the op's default),
// reports and modelled flag; false (and why, in `skipped`) when there is nothing to compare.
bool start_comparison(const Key& key, const ByTokens& by_tokens, Comparison& c,
                      std::vector<std::string>& skipped) {
  c.key = key;
  std::set<std::string> vars;
  std::map<std::string, int> named;
  bool any_ratio = false, all_modelled = true;
  std::set<int> report_set;
  for (const auto& [tokens, cells] : by_tokens) {
    for (const auto& [rr, cell] : cells) {
      report_set.insert(rr.first);
      for (const auto& [v, e] : cell.by_variant) {
        vars.insert(v);
        if (!e->speedup_baseline.empty()) ++named[e->speedup_baseline];
        any_ratio = any_ratio || e->speedup || !e->over.empty();
        all_modelled = all_modelled && e->modelled;
      }
    }
  }
  if (vars.size() < 2) {
    skipped.push_back(key.text() + ": one variant only (" + *vars.begin() + ")");
    return false;
  }
  if (!any_ratio) {
    skipped.push_back(key.text() +
                      ": no paired speedups (its entries were not measured as one interleaved "
                      "group)");
    return false;
  }
  c.baseline = default_baseline(key.op);
  int best = 0;
  for (const auto& [b, n] : named) {
    if (n > best) best = n, c.baseline = b;
  }
  c.variants = order_variants(vars, c.baseline);
  c.modelled = all_modelled;
  c.reports.assign(report_set.begin(), report_set.end());
  return true;
}

// The cost model: the ceilings of the first report that has them (none for communication,
// which the model does not price).
void set_cost_model(const std::vector<Report>& reports, const ByTokens& by_tokens, Comparison& c) {
  bool comm = false;
  for (const auto& [tokens, cells] : by_tokens) {
    for (const auto& [rr, cell] : cells) {
      for (const auto& [v, e] : cell.by_variant)
        comm = comm || e->counter("comm_bytes").value_or(0) > 0;
    }
  }
  c.launch_overhead_s = c.key.backend == "cuda" ? 3e-6 : 1e-6;
  if (comm) {
    c.model_note = "not evaluated: communication is not in the cost model";
    return;
  }
  for (int ri : c.reports) {
    const Report& report = reports[static_cast<std::size_t>(ri)];
    if (auto ceil = report.ceilings_for(c.key.dtype)) {
      c.ceilings = ceil;
      c.model_note = "max(model_flops / peak, model_bytes / bandwidth) + model_launches x " +
                     fmt(c.launch_overhead_s * 1e6, "%g") + " us, ceilings of " + report.file +
                     " (" + ceil->source + ": " + fmt(ceil->peak_flops / 1e9, "%.4g") +
                     " GFLOP/s, " + fmt(ceil->bandwidth / 1e9, "%.4g") + " GB/s)";
      return;
    }
  }
  c.model_note = "not evaluated: no report of this comparison has ceilings";
}

// One observation of `v` over `w` in one report and repetition: the paired ratio, or why it is
// not evidence.
Observation observe(const std::pair<int, int>& rr, const Entry& v, const Entry& w) {
  Observation o;
  o.report = rr.first;
  o.repetition = rr.second;
  const auto r = ratio_of(v, w);
  o.entry = r && r->second ? w.name : v.name;
  if (r) {
    o.ratio = r->first;
    o.inverted = r->second;
  }
  o.modelled = v.modelled || w.modelled;
  const std::string base =
      r ? not_evidence(v, w, o.ratio) : "no paired ratio of the two in the report";
  if (o.modelled) {
    o.excluded =
        "modelled communication (comm_modelled = 1): priced by the link model, not measured";
    if (!base.empty()) o.excluded += "; " + base;
  } else {
    o.excluded = base;
  }
  return o;
}

// The point's variants that ran (comparison order) and the entries that failed.
std::vector<std::string> present_variants(const std::vector<Report>& reports, const Comparison& c,
                                          const Cells& cells, Point& p) {
  std::set<std::string> present;
  std::set<int> rs;
  for (const auto& [rr, cell] : cells) {
    rs.insert(rr.first);
    for (const auto& [v, e] : cell.by_variant) {
      if (e->header.error) {
        p.skipped.push_back(v + " in " + reports[static_cast<std::size_t>(rr.first)].file +
                            ": error: " + e->header.error_message);
      } else {
        present.insert(v);
      }
    }
  }
  p.reports.assign(rs.begin(), rs.end());
  std::vector<std::string> pv;
  for (const auto& v : c.variants) {
    if (present.count(v)) pv.push_back(v);
  }
  return pv;
}

// Pairs, later variant over earlier (fused over split, paired over naive): index[{j, i}] is
// pv[j] over pv[i] in p.pairs.
std::map<std::pair<std::size_t, std::size_t>, std::size_t> add_pairs(
    const std::vector<std::string>& pv, const Cells& cells, Point& p) {
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> index;
  for (std::size_t j = 0; j < pv.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      PairEvidence pe;
      pe.variant = pv[j];
      pe.over = pv[i];
      for (const auto& [rr, cell] : cells) {
        const auto vi = cell.by_variant.find(pe.variant), wi = cell.by_variant.find(pe.over);
        if (vi == cell.by_variant.end() || wi == cell.by_variant.end()) continue;
        if (vi->second->header.error || wi->second->header.error) continue;
        pe.observations.push_back(observe(rr, *vi->second, *wi->second));
      }
      index[{j, i}] = p.pairs.size();
      p.pairs.push_back(pe);
    }
  }
  return index;
}

// Why the point's decision is what it is: the evidence that decided it.
std::string decision_reason(const std::vector<std::string>& pv, const Verdict& v, const Point& p,
                            double margin) {
  std::vector<std::string> because;
  if (pv.size() < 2) {
    because.push_back(pv.empty() ? "no variant ran here" : "only " + pv.front() + " ran here");
  } else if (v.decision == Decision::kUse) {
    for (const auto& pe : p.pairs) {
      if (pe.variant == v.variants.front() || pe.over == v.variants.front())
        because.push_back(evidence_text(pe, margin));
    }
  } else if (v.decision == Decision::kEither) {
    for (const auto& pe : p.pairs) because.push_back(evidence_text(pe, margin));
  } else {
    for (const auto& pe : p.pairs) {
      if (pe.state != "beats" && pe.state != "loses" && pe.state != "within")
        because.push_back(evidence_text(pe, margin));
    }
    if (because.empty()) because.push_back("no variant beats every other, and no tied set does");
  }
  return join(because, "; ");
}

// The cost model's verdict at this token count, where every variant has its model counters.
std::optional<ModelPoint> model_point(const Comparison& c, const std::vector<std::string>& pv,
                                      const Cells& cells, double margin) {
  ModelPoint m;
  for (const auto& var : pv) {
    const Entry* e = nullptr;
    for (const auto& [rr, cell] : cells) {
      const auto it = cell.by_variant.find(var);
      if (it != cell.by_variant.end() && !it->second->header.error &&
          it->second->counter("model_flops") && it->second->counter("model_bytes") &&
          it->second->counter("model_launches")) {
        e = it->second;
        break;
      }
    }
    if (!e) return std::nullopt;
    m.counters[var] = {*e->counter("model_flops"), *e->counter("model_bytes"),
                       *e->counter("model_launches")};
    m.seconds[var] = model_seconds(m.counters[var], *c.ceilings, c.launch_overhead_s);
  }
  m.label = model_verdict(pv, m.seconds, margin).label;
  return m;
}

Point decide_point(const std::vector<Report>& reports, const Comparison& c, std::int64_t tokens,
                   const Cells& cells, double margin) {
  Point p;
  p.tokens = tokens;
  const std::vector<std::string> pv = present_variants(reports, c, cells, p);
  const auto index = add_pairs(pv, cells, p);
  auto verdict = [&](bool accept_modelled) {
    for (auto& pe : p.pairs) pool(pe, margin, accept_modelled);
    return decide(pv, [&](std::size_t i, std::size_t j) {
      if (i > j) return pair_status(p.pairs[index.at({i, j})], margin);
      return flip(pair_status(p.pairs[index.at({j, i})], margin));
    });
  };
  const Verdict v = verdict(false);
  p.decision = v.decision;
  p.variants = v.variants;
  p.label = v.label;
  p.reason = decision_reason(pv, v, p, margin);
  if (c.modelled && pv.size() >= 2) {
    const Verdict mv = verdict(true);
    std::vector<std::string> evidence;
    for (const auto& pe : p.pairs) evidence.push_back(evidence_text(pe, margin));
    p.label = "modelled: " + mv.label;
    p.reason = "modelled communication: not evidence; the modelled figures say " + mv.label + " (" +
               join(evidence, "; ") + ")";
    for (auto& pe : p.pairs) pool(pe, margin, false);  // the evidence as it stands
  }
  if (c.ceilings && pv.size() >= 2) p.model = model_point(c, pv, cells, margin);
  return p;
}

}  // namespace

Table build(std::vector<Report> reports, double margin) {
  refuse_mixed_setups(reports);
  refuse_mixed_routing(reports);
  Table t;
  t.margin = margin;
  for (const auto& [key, by_tokens] : group_entries(reports)) {
    Comparison c;
    if (!start_comparison(key, by_tokens, c, t.skipped)) continue;
    set_cost_model(reports, by_tokens, c);
    for (const auto& [tokens, cells] : by_tokens)
      c.points.push_back(decide_point(reports, c, tokens, cells, margin));
    place_ranges(c, margin);
    add_accuracy(c, by_tokens);
    add_range_accuracy(c);
    t.comparisons.push_back(std::move(c));
  }
  t.ep_vs_tp = ep_advice(reports, t.comparisons);  // TP or EP (tp_moe), beside the decisions
  // The entries served their purpose; the metadata (file, device, revision) stays for the output.
  for (auto& r : reports) r.entries.clear();
  t.reports = std::move(reports);
  return t;
}

}  // namespace fusebench::advise
