// The MoE block across tp ranks (issue 40, docs/tp.md "The MoE block across ranks"): the routed
// experts of one layer at M tokens, y = shared(x) + sum over token t's k experts e of
// w[t, e] * down_e(act(gate_e(x_t)) * up_e(x_t)), each rank running the moe op's grouped
// variant (its best single-rank variant at every token count measured, docs/moe.md) on its part:
//   tp        every rank holds every expert with its intermediate sharded (w13 column-parallel,
//             w2 row-parallel, vLLM's FusedMoE without --enable-expert-parallel) and all M
//             tokens (TP attention); one all-reduce of y. The shared expert is sharded the same.
//   ep_ar     expert parallel with TP attention: every rank holds the M tokens, so nothing is
//             dispatched; each rank runs its own experts' slots, and one all-reduce combines
//             (the shared expert TP-sharded as in tp).
//   ep_ag_rs  expert parallel with data-parallel attention: rank r brings its Mp/tp rows of the
//             M tokens (M padded to a multiple of tp, as sp does); vLLM's default EP backend
//             (allgather_reducescatter) all-gathers the rows, each rank runs its experts' slots,
//             and a reduce-scatter returns each rank its rows of the sum; the shared expert runs
//             whole on the rank's own rows (DP replicates it) and is added after.
//   ep_a2a    expert parallel with data-parallel attention, DeepEP-style: each token goes once to
//             every rank holding one of its experts' chosen replicas (an all-to-all of the routed
//             rows only), each rank runs its experts on the rows it received and sends back per
//             token the weighted sum of its slots (a second all-to-all), and the owner adds them
//             (onto the shared expert's output, run whole on its own rows).
// Expert placement (EP): vLLM's determine_expert_map (--expert-placement=linear|round_robin) or,
// with --redundant-experts, DeepSeek's EPLB on this routing's loads (expert_placement.hpp). The
// entry's moe_ranks says what every rank holds and runs (placement.cpp's rank_load).
#include <algorithm>
#include <memory>
#include <optional>

#include "fusebench/expert_placement.hpp"
#include "fusebench/routing.hpp"
#include "tp_common.hpp"
#include "tp_moe_model.hpp"

namespace fusebench::ops {
namespace {

constexpr const char* kOp = "tp_moe";

std::string expert_tensor(const char* kind, std::int64_t e, const char* what) {
  return std::string(kind) + "_expert" + std::to_string(e) + "_" + what;
}

bool expert_parallel(const std::string& variant) { return variant != "tp"; }
bool dp_attention(const std::string& variant) {
  return variant == "ep_ag_rs" || variant == "ep_a2a";
}

void check(const ShardShape& s, const std::string& variant) {
  if (variant != "tp" && variant != "ep_ar" && variant != "ep_ag_rs" && variant != "ep_a2a")
    unknown_variant(tp_moe_op(), variant);
  if (!s.moe || s.mlp != LayerKind::expert || s.intermediate <= 0)
    throw std::invalid_argument("tp_moe: this shard has no routed experts (the model is not MoE)");
  if (s.mlp_bias || s.interleaved_gate_up)
    throw std::invalid_argument(
        "tp_moe: expert biases and an interleaved w13 (gpt-oss) are not built across ranks yet; "
        "moe at --tp=1 runs them");
  const std::int64_t shared = s.moe->shared_intermediate;
  if (shared > 0 && !dp_attention(variant) && shared % s.tp != 0)
    throw std::invalid_argument("tp_moe/" + variant + ": the shared expert's intermediate " +
                                std::to_string(shared) +
                                " is not divisible by tp=" + std::to_string(s.tp));
}

RoutingAssignment route_tokens(const ShardShape& s, std::int64_t m) {
  const MoeBlock& b = *s.moe;
  return b.router ? make_routing(b.source, b.rule, m, s.hidden, b.seed, *b.router)
                  : make_routing(b.source, b.rule, m, s.hidden, b.seed);
}

ExpertPlacement placement_of(const ShardShape& s, const RoutingAssignment& a) {
  if (s.moe->redundant_experts > 0)
    return eplb_placement(a.rows_per_expert(), s.tp, s.moe->redundant_experts);
  return place_experts(a.experts, s.tp, parse_placement(s.moe->placement));
}

// This rank's experts (logical ids, in local order) and its routed rows grouped by them: the
// token of each row and its routing weight (on the output, or on the input for Llama-4).
struct LocalRows {
  std::vector<std::int64_t> logical;
  std::vector<std::int64_t> start{0};
  std::vector<std::int64_t> token;
  std::vector<float> scale, in_scale;
  std::int64_t rows() const { return start.back(); }
};

LocalRows local_rows(const ShardShape& s, const RoutingAssignment& a,
                     const std::optional<ExpertPlacement>& placement) {
  LocalRows out;
  std::vector<std::int64_t> physical;  // the replica each slot goes to (EP)
  std::vector<std::int64_t> mine;      // this rank's physical experts (EP), or every expert
  if (placement) {
    physical = physical_of_slots(a, *placement);
    mine = placement->on_rank(s.rank);
  } else {
    for (std::int64_t e = 0; e < a.experts; ++e) mine.push_back(e);
  }
  const bool on_input = s.moe->rule.weight_on_input;
  for (const std::int64_t q : mine) {
    const std::int64_t e = placement ? placement->logical_of[static_cast<std::size_t>(q)] : q;
    out.logical.push_back(e);
    for (std::int64_t j = a.expert_offset[e]; j < a.expert_offset[e + 1]; ++j) {
      const std::int64_t slot = a.expert_slots[static_cast<std::size_t>(j)];
      if (placement && physical[static_cast<std::size_t>(slot)] != q) continue;  // another replica
      const float w = a.weights[static_cast<std::size_t>(slot)];
      out.token.push_back(slot / a.top_k);
      out.scale.push_back(on_input ? 1.0f : w);
      if (on_input) out.in_scale.push_back(w);
    }
    out.start.push_back(static_cast<std::int64_t>(out.token.size()));
  }
  return out;
}

View rows_view(const Plan& p, int buffer, std::int64_t r0, std::int64_t n) {
  return tp::rows_of(whole(p, buffer), r0, n);
}

// The shared expert on `x` into `y` (GEMMs write y): sharded over the ranks (tp, ep_ar: the
// all-reduce sums the shards) or whole (ep_ag_rs: on the rank's own rows); qwen2_moe's sigmoid
// gate after it (linear in y, so a shard scaled by it sums to the scaled whole).
void add_shared_expert(Plan& p, const ShardShape& s, int x, int y, bool sharded) {
  const std::int64_t h = s.hidden, full = s.moe->shared_intermediate;
  const std::int64_t sl = sharded ? full / s.tp : full, r0 = sharded ? s.rank * sl : 0;
  const int w13 = tp::add_windowed(p, "w_shared_gate_up", BufferRole::weight,
                                   {{"w_shared_expert_gate", sl, {full, h, r0, 0}},
                                    {"w_shared_expert_up", sl, {full, h, r0, 0}}},
                                   h);
  const int w2 = tp::add_windowed(p, "w_shared_down", BufferRole::weight,
                                  {{"w_shared_expert_down", h, {h, full, 0, r0}}}, sl);
  const std::int64_t rows = p.buffers[static_cast<std::size_t>(x)].rows;
  const int gu = add_output(p, "shared_gate_up", rows, 2 * sl);
  const int act = add_output(p, "shared_act", rows, sl);
  p.add_step(GemmStep{"shared_gate_up_proj", whole(p, x), whole(p, w13), whole(p, gu)});
  p.add_step(ActAndMulStep{tp::act_label(s.activation), columns(p, gu, 0, sl),
                           columns(p, gu, sl, sl), whole(p, act), s.activation, s.activation_limit,
                           1});
  p.add_step(GemmStep{"shared_down_proj", whole(p, act), whole(p, w2), whole(p, y)});
  if (!s.moe->rule.shared_expert_gate) return;
  const int wg = add_weight(p, "w_shared_sigmoid_gate", {{"w_shared_expert_sigmoid_gate", 1}}, h);
  const int g = add_output(p, "shared_gate", rows, 1);
  p.add_step(GemmStep{"shared_expert_gate", whole(p, x), whole(p, wg), whole(p, g)});
  p.add_step(SigmoidGateRowsStep{"shared_sigmoid_scale", whole(p, y), whole(p, g)});
}

// The rank's routed experts as the moe op's grouped variant: one gather of its rows from `src`,
// one grouped GEMM over its experts' w13, one act-and-mul, one grouped GEMM for w2, one combine
// into y (zeroing y first when `zero`). A rank without rows still zeroes y when asked (one
// launch), and runs nothing else.
void add_routed_experts(Plan& p, const ShardShape& s, const LocalRows& lr, bool ep, int src, int y,
                        bool zero) {
  const std::int64_t h = s.hidden, full = s.intermediate * s.tp;
  const std::int64_t inter = ep ? full : s.intermediate, row0 = ep ? 0 : s.rank * s.intermediate;
  std::vector<tp::WindowPart> w13_parts, w2_parts;
  for (const std::int64_t e : lr.logical) {
    w13_parts.push_back({expert_tensor("w", e, "gate"), inter, {full, h, row0, 0}});
    w13_parts.push_back({expert_tensor("w", e, "up"), inter, {full, h, row0, 0}});
    w2_parts.push_back({expert_tensor("w", e, "down"), h, {h, full, 0, row0}});
  }
  const int w13 = tp::add_windowed(p, "w13", BufferRole::weight, w13_parts, h);
  const int w2 = tp::add_windowed(p, "w2", BufferRole::weight, w2_parts, inter);
  const std::int64_t n = lr.rows(), buffer_rows = std::max<std::int64_t>(n, 1);
  const int xs = add_output(p, "expert_x", buffer_rows, h);
  const int gu = add_output(p, "expert_gate_up", buffer_rows, 2 * inter);
  const int act = add_output(p, "expert_act", buffer_rows, inter);
  const int out = add_output(p, "expert_out", buffer_rows, h);
  if (n == 0) {
    if (zero)  // nothing routed here: y is this rank's zero contribution
      p.add_step(
          ScatterAddStep{"combine", rows_view(p, out, 0, 1), whole(p, y), {-1}, {0.0f}, true});
    return;
  }
  p.add_step(
      GatherRowsStep{"gather", whole(p, src), rows_view(p, xs, 0, n), lr.token, lr.in_scale});
  GroupedGemmStep up{"w13_grouped", {}, false}, down{"w2_grouped", {}, false};
  for (std::size_t j = 0; j < lr.logical.size(); ++j) {
    const std::int64_t r0 = lr.start[j], rows = lr.start[j + 1] - r0;
    if (rows == 0) continue;
    const auto local = static_cast<std::int64_t>(j);
    const std::string e = std::to_string(lr.logical[j]);
    up.gemms.push_back(GemmStep{"w13_expert" + e, rows_view(p, xs, r0, rows),
                                rows_view(p, w13, local * 2 * inter, 2 * inter),
                                rows_view(p, gu, r0, rows)});
    down.gemms.push_back(GemmStep{"w2_expert" + e, rows_view(p, act, r0, rows),
                                  rows_view(p, w2, local * h, h), rows_view(p, out, r0, rows)});
  }
  p.add_step(std::move(up));
  View gate = rows_view(p, gu, 0, n), upv = gate;
  gate.cols = upv.cols = inter;
  upv.col0 = inter;
  p.add_step(ActAndMulStep{tp::act_label(s.activation), gate, upv, rows_view(p, act, 0, n),
                           s.activation, s.activation_limit, 1});
  p.add_step(std::move(down));
  p.add_step(
      ScatterAddStep{"combine", rows_view(p, out, 0, n), whole(p, y), lr.token, lr.scale, zero});
}

// ep_a2a's traffic for rank `rank`: the rows it sends (its tokens, grouped by destination rank,
// each token once per rank holding one of its slots' replicas) and receives (grouped by source
// rank), and where each received token sits in its receive buffer.
struct A2aRoutes {
  std::vector<std::int64_t> send_rows, recv_rows;  // per rank
  std::vector<std::int64_t> send_local;            // the local row of each row sent, in send order
  std::vector<std::int64_t> recv_row;  // per token of the M: its received row here, or -1
  std::int64_t sent() const { return static_cast<std::int64_t>(send_local.size()); }
  std::int64_t received() const {
    std::int64_t n = 0;
    for (const auto r : recv_rows) n += r;
    return n;
  }
};

A2aRoutes a2a_routes(const ShardShape& s, std::int64_t m, const RoutingAssignment& a,
                     const ExpertPlacement& placement, int rank) {
  const std::vector<std::int64_t> physical = physical_of_slots(a, placement);
  const auto ranks = static_cast<std::size_t>(s.tp);
  // to[t * tp + d]: token t has a slot on rank d.
  std::vector<char> to(static_cast<std::size_t>(m) * ranks, 0);
  for (std::size_t slot = 0; slot < physical.size(); ++slot) {
    const auto t = static_cast<std::size_t>(static_cast<std::int64_t>(slot) / a.top_k);
    const auto d =
        static_cast<std::size_t>(placement.rank_of[static_cast<std::size_t>(physical[slot])]);
    to[t * ranks + d] = 1;
  }
  const auto rows_of_rank = [&](int r) {
    ShardShape rs = s;
    rs.rank = r;
    return tp::sp_rows(rs, m);
  };
  A2aRoutes out;
  out.send_rows.assign(ranks, 0);
  out.recv_rows.assign(ranks, 0);
  out.recv_row.assign(static_cast<std::size_t>(m), -1);
  const tp::SpRows mine = rows_of_rank(rank);
  for (std::size_t d = 0; d < ranks; ++d) {
    for (std::int64_t i = 0; i < mine.real; ++i) {
      if (!to[static_cast<std::size_t>(mine.row0 + i) * ranks + d]) continue;
      out.send_local.push_back(i);
      ++out.send_rows[d];
    }
  }
  std::int64_t at = 0;
  for (int src = 0; src < s.tp; ++src) {
    const tp::SpRows theirs = rows_of_rank(src);
    for (std::int64_t t = theirs.row0; t < theirs.row0 + theirs.real; ++t) {
      if (!to[static_cast<std::size_t>(t) * ranks + static_cast<std::size_t>(rank)]) continue;
      out.recv_row[static_cast<std::size_t>(t)] = at++;
      ++out.recv_rows[static_cast<std::size_t>(src)];
    }
  }
  return out;
}

// What the entry states about the ranks (every rank's, computed alike on each): the layout, the
// collectives, the placement and per rank its experts, routed rows, tokens, modelled FLOPs and
// the weight bytes it holds.
nlohmann::json ranks_json(const ShardShape& s, const std::string& variant,
                          const RoutingAssignment& a,
                          const std::optional<ExpertPlacement>& placement, DType dtype) {
  const bool ep = expert_parallel(variant), dp = dp_attention(variant);
  const std::int64_t h = s.hidden, full = s.intermediate * s.tp;
  const std::int64_t inter = ep ? full : s.intermediate;
  const double expert_bytes = 3.0 * static_cast<double>(inter * h) * dtype_size(dtype);
  nlohmann::json j;
  const std::string dp_rows =
      "data-parallel attention: rank r brings rows [r*Mp/tp, (r+1)*Mp/tp) of the M tokens (M "
      "padded to a multiple of tp); ";
  j["variant_layout"] =
      variant == "ep_a2a"
          ? dp_rows +
                "dispatch sends each token once to every rank holding one of its slots' "
                "experts (all-to-all), combine returns per token and rank the weighted sum "
                "of its slots (all-to-all)"
      : dp ? dp_rows + "dispatch all-gathers them, combine reduce-scatters"
           : "tensor-parallel attention: every rank holds the same M tokens; no dispatch, the "
             "combine is one all-reduce of y";
  j["experts"] = ep ? "expert parallel: whole experts placed on the ranks"
                    : "tensor parallel: every expert on every rank, intermediate/tp of it";
  j["ranks"] = s.tp;
  RankLoad load;
  if (placement) {
    load = rank_load(a, *placement);
    j["placement"] = rank_load_json(load, *placement);
  } else {  // every rank runs every slot, on its intermediate shard
    const std::int64_t slots = a.tokens * a.top_k;
    const RoutingStats st = routing_stats(a);
    load.rows.assign(static_cast<std::size_t>(s.tp), slots);
    load.experts.assign(static_cast<std::size_t>(s.tp), a.experts);
    load.active_experts.assign(static_cast<std::size_t>(s.tp), st.active_experts);
    load.tokens.assign(static_cast<std::size_t>(s.tp), a.tokens);
    load.mean_rows = static_cast<double>(slots);
    load.imbalance = 1;
    j["placement"] = {{"strategy", "none (tensor parallel)"},
                      {"rows_per_rank", load.rows},
                      {"experts_per_rank", load.experts},
                      {"active_experts_per_rank", load.active_experts},
                      {"tokens_per_rank", load.tokens},
                      {"mean_rows", load.mean_rows},
                      {"imbalance", 1.0},
                      {"slowest_rank", 0}};
  }
  std::vector<double> flops, held, read;
  for (std::size_t r = 0; r < load.rows.size(); ++r) {
    flops.push_back(rows_flops(load.rows[r], {{2 * inter, h}, {h, inter}}));
    held.push_back(static_cast<double>(load.experts[r]) * expert_bytes);
    read.push_back(static_cast<double>(load.active_experts[r]) * expert_bytes);
  }
  if (variant == "ep_a2a" && s.tp > 1) {  // every rank's all-to-all rows (both ways, reversed)
    std::vector<std::int64_t> sent, received;
    for (int r = 0; r < s.tp; ++r) {
      const A2aRoutes routes = a2a_routes(s, a.tokens, a, *placement, r);
      sent.push_back(routes.sent());
      received.push_back(routes.received());
    }
    j["dispatch_rows_sent_per_rank"] = sent;
    j["dispatch_rows_received_per_rank"] = received;
  }
  j["modelled_expert_flops_per_rank"] = flops;
  j["expert_weight_bytes_held_per_rank"] = held;
  j["expert_weight_bytes_read_per_rank"] = read;
  // EPLB's price: the replicas' weights, beyond E/tp whole experts per rank.
  if (placement && placement->redundant > 0) {
    std::vector<double> extra;
    for (const auto e : load.experts)
      extra.push_back((static_cast<double>(e) - static_cast<double>(a.experts) / s.tp) *
                      expert_bytes);
    j["redundant_weight_bytes_per_rank"] = extra;
  }
  return j;
}

// ep_ag_rs: all-gather x, the rank's experts into y [Mp, h], reduce-scatter into its rows; the
// shared expert on its own rows, added after.
void add_gather_scatter(Plan& p, const ShardShape& s, const LocalRows& lr, const tp::SpRows& rows,
                        int x, int out) {
  const bool comm = s.tp > 1;
  const int src = comm ? add_output(p, "x_gathered", rows.padded, s.hidden) : x;
  const int y = comm ? add_output(p, "y_gathered", rows.padded, s.hidden) : out;
  if (comm) p.add_step(AllGatherRowsStep{"all_gather_x", whole(p, x), whole(p, src)});
  add_routed_experts(p, s, lr, true, src, y, true);
  if (comm) p.add_step(ReduceScatterStep{"reduce_scatter_y", whole(p, y), whole(p, out)});
  if (s.moe->shared_intermediate == 0) return;
  const int ys = add_output(p, "shared_y", rows.local, s.hidden);
  add_shared_expert(p, s, x, ys, false);
  std::vector<std::int64_t> identity(static_cast<std::size_t>(rows.local));
  for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<std::int64_t>(i);
  p.add_step(ScatterAddStep{"add_shared", whole(p, ys), whole(p, out), identity,
                            std::vector<float>(identity.size(), 1.0f), false});
}

// ep_a2a: pack the rows each rank gets, all-to-all them, the rank's experts on what it received
// into per-token partial sums, all-to-all those back, add them onto the shared expert's output
// (or into zeroed rows).
void add_all_to_all(Plan& p, const ShardShape& s, LocalRows lr, const A2aRoutes& routes, int x,
                    int out) {
  const std::int64_t h = s.hidden, sent = routes.sent(), received = routes.received();
  const int send = add_output(p, "dispatch_send", std::max<std::int64_t>(sent, 1), h);
  const int recv = add_output(p, "dispatch_recv", std::max<std::int64_t>(received, 1), h);
  const int partial = add_output(p, "combine_send", std::max<std::int64_t>(received, 1), h);
  const int back = add_output(p, "combine_recv", std::max<std::int64_t>(sent, 1), h);
  if (sent > 0)
    p.add_step(GatherRowsStep{"dispatch_pack", whole(p, x), rows_view(p, send, 0, sent),
                              routes.send_local});
  p.add_step(AllToAllRowsStep{"all_to_all_dispatch", whole(p, send), whole(p, recv),
                              routes.send_rows, routes.recv_rows});
  for (auto& t : lr.token) t = routes.recv_row[static_cast<std::size_t>(t)];  // rows received
  add_routed_experts(p, s, lr, true, recv, partial, true);
  p.add_step(AllToAllRowsStep{"all_to_all_combine", whole(p, partial), whole(p, back),
                              routes.recv_rows, routes.send_rows});
  const bool shared = s.moe->shared_intermediate > 0;
  if (shared) add_shared_expert(p, s, x, out, false);  // writes out; the combine adds to it
  if (sent > 0) {
    p.add_step(ScatterAddStep{"combine", rows_view(p, back, 0, sent), whole(p, out),
                              routes.send_local, std::vector<float>(routes.send_local.size(), 1.0f),
                              !shared});
  } else if (!shared) {  // nothing comes back: the rank's rows are zero
    p.add_step(
        ScatterAddStep{"combine", rows_view(p, back, 0, 1), whole(p, out), {-1}, {0.0f}, true});
  }
}

// No quantized variants (quant_variants is null), so a request never carries a spec here.
Plan build(const ShardShape& s, std::int64_t m, const PlanRequest& request,
           const std::string& variant) {
  const DType dtype = request.dtype;
  check(s, variant);
  const bool ep = expert_parallel(variant), dp = dp_attention(variant);
  const std::int64_t h = s.hidden;
  auto routing = std::make_shared<MoeRouting>();
  routing->assignment = route_tokens(s, m);
  const RoutingAssignment& a = routing->assignment;
  std::optional<ExpertPlacement> placement;
  if (ep) placement = placement_of(s, a);
  const LocalRows lr = local_rows(s, a, placement);
  routing->ranks = ranks_json(s, variant, a, placement, dtype);

  Plan p = start_plan(kOp, s, m, dtype, variant);
  if (dp) {
    const tp::SpRows rows = tp::sp_rows(s, m);
    p.padded_tokens = rows.padded - m;
    const int x = tp::add_sp_input(p, rows, m, h);
    const int out = add_output(p, "out", rows.local, h);
    if (variant == "ep_a2a" && s.tp > 1) {
      add_all_to_all(p, s, lr, a2a_routes(s, m, a, *placement, s.rank), x, out);
    } else {  // at tp = 1 neither dispatches: the rank's experts on x into out
      add_gather_scatter(p, s, lr, rows, x, out);
    }
    p.outputs["out"] = whole(p, out);
    p.output_rows["out"] = {std::min(rows.row0, m), rows.real};
  } else {
    const int x = add_input(p, "x", m, h);
    const int out = add_output(p, "out", m, h);
    const bool shared = s.moe->shared_intermediate > 0;
    if (shared) add_shared_expert(p, s, x, out, true);  // writes y; the combine adds to it
    add_routed_experts(p, s, lr, ep, x, out, !shared);
    if (s.tp > 1) p.add_step(AllReduceStep{"all_reduce_y", whole(p, out)});
    p.outputs["out"] = whole(p, out);
  }
  p.moe = std::move(routing);
  return p;
}

ShardShape unsharded_block(const ShardShape& s) {
  ShardShape u = s;
  u.intermediate = s.intermediate * s.tp;
  u.tp = 1;
  u.rank = 0;
  return u;
}

// The whole block in float64 (the moe op's reference on the unsharded shard, the plan's routing),
// then this rank's rows of it for the data-parallel layout (its padding rows: zeros).
ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  Plan whole_block = p;
  whole_block.op = "moe";
  whole_block.shard = unsharded_block(p.shard);
  std::vector<double> y = moe_op().reference(whole_block, in).at("y");
  if (p.output_rows.count("out") == 0) return {{"out", std::move(y)}};
  y.resize(static_cast<std::size_t>(tp::padded_tokens_of(p) * p.shard.hidden), 0.0);
  return {{"out", tp::rank_rows(p, y, p.shard.hidden)}};
}

// The same block over the first `rows` rows of this rank's "out" alone (all M when the routing
// cannot be re-drawn at fewer tokens: a tokens_per_expert file): the tokens those rows hold, x's
// rows and the routing's slots of them (token_window), rows past M (padding) zero.
ReferenceOutputs reference_head(const Plan& p, LogicalTensors in, std::int64_t rows) {
  const std::int64_t h = p.shard.hidden, local = p.outputs.at("out").rows;
  const std::int64_t n = std::min(rows, local);
  const std::int64_t row0 = p.output_rows.count("out") ? p.shard.rank * local : 0;
  const std::int64_t real = std::clamp<std::int64_t>(p.tokens - row0, 0, n);
  std::vector<double> y(static_cast<std::size_t>(n * h), 0.0);
  if (real == 0) return {{"out", std::move(y)}};
  Plan window = p;
  window.op = "moe";
  window.shard = unsharded_block(p.shard);
  window.tokens = real;
  window.output_rows.clear();
  auto routing = std::make_shared<MoeRouting>();
  routing->assignment = token_window(p.moe->assignment, row0, real);
  window.moe = std::move(routing);
  std::vector<float>& x = in.at("x");
  x.erase(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(row0 * h));
  x.resize(static_cast<std::size_t>(real * h));
  const std::vector<double> head = moe_op().reference(window, in).at("y");
  std::copy(head.begin(), head.end(), y.begin());
  return {{"out", std::move(y)}};
}

// What the reference reads: x and every routed expert's whole tensors (a rank's plan holds only
// its experts, or its shard of them), the shared expert's whole.
Plan reference_plan(const Plan& p) {
  const ShardShape& s = p.shard;
  const std::int64_t h = s.hidden, full = s.intermediate * s.tp;
  Plan q = start_plan(kOp, s, p.tokens, p.dtype, p.variant);
  add_input(q, "x", p.tokens, h);
  const RoutingAssignment& a = p.moe->assignment;
  for (std::int64_t e = 0; e < a.experts; ++e) {
    if (a.rows(e) == 0) continue;
    add_weight(q, "w13_expert" + std::to_string(e),
               {{expert_tensor("w", e, "gate"), full}, {expert_tensor("w", e, "up"), full}}, h);
    add_weight(q, "w2_expert" + std::to_string(e), {{expert_tensor("w", e, "down"), h}}, full);
  }
  if (const std::int64_t sh = s.moe->shared_intermediate; sh > 0) {
    add_weight(q, "w_shared_gate_up", {{"w_shared_expert_gate", sh}, {"w_shared_expert_up", sh}},
               h);
    add_weight(q, "w_shared_down", {{"w_shared_expert_down", h}}, sh);
    if (s.moe->rule.shared_expert_gate)
      add_weight(q, "w_shared_sigmoid_gate", {{"w_shared_expert_sigmoid_gate", 1}}, h);
  }
  return q;
}

// The entry's routing (moe.routing) and what every rank holds and runs, with the cost model's
// prediction from every rank's plan (tp_moe_model.hpp).
void entry_fields(const Plan& plan, nlohmann::json& fields) {
  if (!plan.moe) return;
  fields["moe"] = moe_json(*plan.moe);
  nlohmann::json ranks = plan.moe->ranks;
  std::vector<Plan> plans;
  for (int r = 0; r < plan.shard.tp; ++r) {
    ShardShape s = plan.shard;
    s.rank = r;
    plans.push_back(
        r == plan.shard.rank ? plan : build(s, plan.tokens, PlanRequest{plan.dtype}, plan.variant));
  }
  ranks["predicted"] =
      predict_across_ranks(plans, tp_moe_nominal_ceilings(), tp_moe_nominal_link());
  fields["moe_ranks"] = std::move(ranks);
}

}  // namespace

OpInfo tp_moe_op() {
  OpInfo op{kOp,
            "the MoE block across tp ranks, each running moe's grouped variant on its part: "
            "experts TP-sharded with one all-reduce (tp) vs expert parallel with TP attention "
            "and an all-reduce combine (ep_ar) vs expert parallel with DP attention, all-gather "
            "dispatch and reduce-scatter combine (ep_ag_rs) or all-to-all of the routed rows "
            "(ep_a2a)",
            {"tp", "ep_ar", "ep_ag_rs", "ep_a2a"},
            build,
            reference};
  op.in_default_sweep = false;  // every expert's weights, across ranks: on request
  op.across_ranks = true;
  op.reads_all_experts = true;
  op.own_flags = {"--routing", "--expert-placement", "--redundant-experts"};
  op.one_launch_everywhere = true;
  op.setup = [](const ModelSetup& m) { return moe_block_setup(m, kOp, "tp"); };
  op.entry_fields = entry_fields;
  op.unsharded_variant = "";  // the float64 block is the reference (moe at tp 1 verifies moe)
  op.reference_plan = reference_plan;
  op.reference_head = reference_head;
  return op;
}

}  // namespace fusebench::ops
