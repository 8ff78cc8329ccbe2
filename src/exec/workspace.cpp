#include "fusebench/workspace.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "fusebench/checked_size.hpp"
#include "fusebench/communicator.hpp"
#include "fusebench/cost_model.hpp"

namespace fusebench {
namespace {

thread_local std::int64_t collectives_on_this_thread = 0;

std::uint64_t fnv1a(const std::string& text, std::uint64_t seed) {
  std::uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::vector<float> logical_tensor(const std::string& name, std::int64_t rows, std::int64_t cols,
                                  BufferRole role, DType dtype, std::uint64_t seed) {
  return logical_window(name, rows, cols, 0, 0, rows, cols, role, dtype, seed);
}

namespace {

// The window's values before rounding to the dtype (encode() rounds them for the device).
std::vector<float> unrounded_window(const std::string& name, std::int64_t logical_rows,
                                    std::int64_t logical_cols, std::int64_t row0, std::int64_t col0,
                                    std::int64_t rows, std::int64_t cols, BufferRole role,
                                    std::uint64_t seed) {
  if (row0 < 0 || col0 < 0 || row0 + rows > logical_rows || col0 + cols > logical_cols) {
    throw std::invalid_argument("window of " + name + " outside its " +
                                std::to_string(logical_rows) + "x" + std::to_string(logical_cols) +
                                " tensor");
  }
  // Counter-based (splitmix64 of the element index): element (r, c) depends only on (seed, name,
  // r, c), so a rank's shard is generated without the rest of the unsharded tensor.
  const std::uint64_t key = fnv1a(name, seed);
  // Weights scaled by 1/sqrt(K) keep every output O(1), so one tolerance fits all shapes.
  const float scale =
      role == BufferRole::weight ? 1.0f / std::sqrt(static_cast<float>(logical_cols)) : 1.0f;
  std::vector<float> values(size_mul(rows, cols, [&] { return "window of " + name; }));
  const auto fill_rows = [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t r = first; r < last; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        std::uint64_t z =
            key + static_cast<std::uint64_t>((row0 + r) * logical_cols + col0 + c + 1) *
                      0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float x = static_cast<float>(z >> 40) * 0x1.0p-23f - 1.0f;  // uniform in [-1, 1)
        if (x == 0.0f) x = 0.5f;                                    // never zero
        values[static_cast<std::size_t>(r * cols + c)] = x * scale;
      }
    }
  };
  // Rows are independent, so big tensors (a 70B model's MLP weight is ~0.5 G elements, made
  // again for every token count) are filled on several threads; the values do not change.
  const auto threads =
      static_cast<std::int64_t>(rows * cols < (std::int64_t{1} << 22)
                                    ? 1
                                    : std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  std::vector<std::thread> workers;
  for (std::int64_t t = 1; t < threads; ++t)
    workers.emplace_back(fill_rows, rows * t / threads, rows * (t + 1) / threads);
  fill_rows(0, rows / threads);
  for (auto& w : workers) w.join();
  return values;
}

// Row r of part p goes to row r * parts + p (all parts have the same rows).
void interleave_rows(const std::vector<std::vector<std::byte>>& parts, const BufferSpec& b,
                     DType dtype, std::vector<std::byte>& out) {
  const std::size_t row = static_cast<std::size_t>(b.cols) * dtype_size(dtype);
  for (std::size_t p = 1; p < parts.size(); ++p) {
    if (b.part_rows[p] != b.part_rows[0])
      throw std::logic_error("buffer " + b.name + ": interleaved parts differ in rows");
  }
  for (std::int64_t r = 0; r < (parts.empty() ? 0 : b.part_rows[0]); ++r) {
    for (const auto& part : parts) {
      const auto* src = part.data() + static_cast<std::size_t>(r) * row;
      out.insert(out.end(), src, src + row);
    }
  }
}

}  // namespace

std::vector<float> logical_window(const std::string& name, std::int64_t logical_rows,
                                  std::int64_t logical_cols, std::int64_t row0, std::int64_t col0,
                                  std::int64_t rows, std::int64_t cols, BufferRole role,
                                  DType dtype, std::uint64_t seed) {
  const std::vector<float> values =
      unrounded_window(name, logical_rows, logical_cols, row0, col0, rows, cols, role, seed);
  // Round to the dtype so the float64 reference sees exactly what the device sees.
  return decode(encode(values, dtype).data(), values.size(), dtype);
}

std::vector<float> RandomTensors::window(const WindowRequest& r) const {
  return unrounded_window(r.name, r.logical_rows, r.logical_cols, r.row0, r.col0, r.rows, r.cols,
                          r.role, seed_);
}

std::string RandomTensors::describe() const {
  return "random (seed " + std::to_string(seed_) + ")";
}

namespace {

// Part `p` of buffer `b` as a request: a window of a larger logical tensor (a TP rank's shard),
// or the whole tensor.
WindowRequest part_request(const Plan& plan, const BufferSpec& b, std::size_t p) {
  const BufferSpec::Window whole{b.part_rows[p], b.cols, 0, 0};
  const auto& w = p < b.part_windows.size() ? b.part_windows[p] : whole;
  return {b.parts[p], b.role,         w.logical_rows, w.logical_cols, w.row0,
          w.col0,     b.part_rows[p], b.cols,         plan.dtype};
}

const TensorSource& source_of(const BufferSpec& b, const RandomTensors& random,
                              const TensorSource* weights) {
  return weights != nullptr && b.role == BufferRole::weight ? *weights : random;
}

}  // namespace

std::optional<QuantMat> stored_quantized_buffer(const Plan& plan, const BufferSpec& b,
                                                const TensorSource* weights) {
  if (weights == nullptr || b.role != BufferRole::weight || !b.quantized ||
      b.store != BufferSpec::Store::codes)
    return std::nullopt;
  std::vector<QuantMat> shards;
  for (std::size_t p = 0; p < b.parts.size(); ++p) {
    auto m = weights->stored_quantized(part_request(plan, b, p));
    if (!m) {
      if (shards.empty()) continue;
      throw std::logic_error("buffer " + b.name + ": " + weights->describe() + " stores " +
                             b.parts.front() + " quantized but not " + b.parts[p]);
    }
    if (m->dtype != b.quantized->dtype || m->kind != b.quantized->kind)
      throw std::invalid_argument(
          "buffer " + b.name + ": " + weights->describe() + " stores " + b.parts[p] + " as " +
          std::string(to_string(m->dtype)) + " with " + std::to_string(m->scales.size()) +
          " scales of another granularity than the plan's; run the checkpoint at its own spec");
    shards.push_back(std::move(*m));
  }
  if (shards.empty()) return std::nullopt;
  if (shards.size() != b.parts.size())
    throw std::logic_error("buffer " + b.name + ": " + weights->describe() +
                           " stores some of its parts quantized, not all");
  return merge_shards(std::move(shards), b.quantized->fusion);
}

std::optional<float> stored_static_scale(const Plan& plan, const TensorSource* weights) {
  if (weights == nullptr) return std::nullopt;
  std::optional<float> out;
  for (const auto& b : plan.buffers) {
    if (b.role != BufferRole::weight || b.store != BufferSpec::Store::codes) continue;
    for (const auto& part : b.parts) {
      const auto s = weights->stored_input_scale(part);
      if (s) out = out ? std::max(*out, *s) : *s;
    }
  }
  return out;
}

LogicalTensors logical_inputs(const Plan& plan, std::uint64_t seed, const TensorSource* weights,
                              bool windows_only) {
  const RandomTensors random(seed);
  LogicalTensors out;
  for (const auto& b : plan.buffers) {
    if (b.store == BufferSpec::Store::scales) continue;  // a static scale: calibrated on x
    for (std::size_t i = 0; i < b.parts.size(); ++i) {
      WindowRequest r = part_request(plan, b, i);
      if (windows_only && i < b.part_windows.size()) {  // the part's rows and columns alone
        if (out.count(b.parts[i]))
          throw std::logic_error("plan " + plan.op + "/" + plan.variant + " holds " + b.parts[i] +
                                 " twice; its windows need the whole tensor");
      } else {  // the whole tensor the part is (a window of)
        r.row0 = r.col0 = 0;
        r.rows = r.logical_rows;
        r.cols = r.logical_cols;
      }
      // Rounded as the device sees it.
      const auto values = source_of(b, random, weights).window(r);
      out[b.parts[i]] = decode(encode(values, plan.dtype).data(), values.size(), plan.dtype);
    }
  }
  return out;
}

// Lane 1 of a plan on the CPU: a thread that runs the lane-1 steps of every run in order, while
// the caller runs lane 0. One mutex and condition variable carry the runs and the completions.
struct Workspace::LaneThread {
  explicit LaneThread(Workspace& ws) : ws_(ws), done_(ws.plan_.steps.size(), 0) {
    thread_ = std::thread([this] { loop(); });
  }
  ~LaneThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Runs lane `lane`'s steps of run `run` on the calling thread; records the first failure.
  void run_lane(int lane, std::uint64_t run, std::span<void* const> buffers, Communicator* comm) {
    try {
      for (std::size_t i = 0; i < ws_.plan_.steps.size(); ++i) {
        const StepOrder& o = ws_.plan_.order_of(i);
        if (o.lane != lane) continue;
        if (!wait_for(o.after, run)) return;  // the other lane failed
        ws_.execute(ws_.plan_.steps[i], buffers, comm);
        std::lock_guard lock(mu_);
        done_[i] = run;
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
      cv_.notify_all();
    }
  }

  // One run: lane 1 here, lane 0 on the caller; returns when both are done.
  void run(std::span<void* const> buffers, Communicator* comm) {
    std::uint64_t run = 0;
    {
      std::lock_guard lock(mu_);
      run = ++posted_;
      buffers_ = buffers;
      comm_ = comm;
      error_ = nullptr;
    }
    cv_.notify_all();
    run_lane(0, run, buffers, comm);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_ == run; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Waits until every step of `after` completed in `run`; false when a lane failed.
  bool wait_for(const std::vector<int>& after, std::uint64_t run) {
    std::unique_lock lock(mu_);
    for (int j : after) {
      cv_.wait(lock, [&] { return done_[static_cast<std::size_t>(j)] == run || error_; });
      if (error_) return false;
    }
    return true;
  }

  void loop() {
    std::uint64_t seen = 0;
    while (true) {
      std::span<void* const> buffers;
      Communicator* comm = nullptr;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return posted_ != seen || stop_; });
        if (stop_) return;
        seen = posted_;
        buffers = buffers_;
        comm = comm_;
      }
      run_lane(1, seen, buffers, comm);
      {
        std::lock_guard lock(mu_);
        finished_ = seen;
      }
      cv_.notify_all();
    }
  }

  Workspace& ws_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> done_;  // per step: the run that completed it
  std::uint64_t posted_ = 0, finished_ = 0;
  std::span<void* const> buffers_;
  Communicator* comm_ = nullptr;
  std::exception_ptr error_;  // the first failure of the run, on either lane
  bool stop_ = false;
  std::thread thread_;
};

Workspace::Workspace(Backend& backend, Plan plan, std::uint64_t seed, const TensorSource* weights)
    : backend_(backend), plan_(std::move(plan)) {
  if (auto why = backend_.unsupported_reason(plan_.dtype); !why.empty()) {
    throw std::invalid_argument(why);
  }
  plan_.check_order();
  signalled_.assign(plan_.steps.size(), 0);
  for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
    const StepOrder& o = plan_.order_of(i);
    uses_lane1_ = uses_lane1_ || o.lane == 1;
    for (int j : o.after) {
      if (plan_.order_of(static_cast<std::size_t>(j)).lane != o.lane)
        signalled_[static_cast<std::size_t>(j)] = 1;
    }
    if (const auto call = collective_call(plan_.steps[i], plan_.dtype)) {
      ++collective_steps_;
      max_message_bytes_ = std::max(max_message_bytes_, static_cast<std::size_t>(call->bytes));
    }
  }
  const RandomTensors random(seed);
  try {
    for (int i = 0; i < static_cast<int>(plan_.buffers.size()); ++i) {
      buffers_.push_back(backend_.allocate(plan_.buffer_bytes(i)));
    }
    for (int i = 0; i < static_cast<int>(plan_.buffers.size()); ++i) {
      const BufferSpec& b = plan_.buffers[static_cast<std::size_t>(i)];
      // Encoded part by part, straight from the source: encode() rounds exactly as
      // logical_inputs() does, and big weights are not copied through float vectors again.
      std::vector<std::byte> bytes;
      if (b.store != BufferSpec::Store::plan_dtype) {
        if (b.quantized) fill_quantized(i, random, weights);  // codes, scales: written there
        continue;
      }
      if (b.parts.empty()) {
        bytes.assign(plan_.buffer_bytes(i), std::byte{0});  // zero in every dtype
      } else {
        bytes.reserve(plan_.buffer_bytes(i));
        const TensorSource& source = source_of(b, random, weights);
        std::vector<std::vector<std::byte>> parts;
        for (std::size_t p = 0; p < b.parts.size(); ++p) {
          auto part = encode(source.window(part_request(plan_, b, p)), plan_.dtype);
          if (b.interleave_parts) {
            parts.push_back(std::move(part));
          } else {
            bytes.insert(bytes.end(), part.begin(), part.end());
          }
        }
        if (b.interleave_parts) interleave_rows(parts, b, plan_.dtype, bytes);
        if (bytes.size() > plan_.buffer_bytes(i))
          throw std::logic_error("buffer " + b.name + ": its parts exceed its rows");
        // Rows beyond the parts are padding (a sequence-parallel rank's rows past M): zeros.
        bytes.resize(plan_.buffer_bytes(i), std::byte{0});
      }
      backend_.upload(buffers_[static_cast<std::size_t>(i)], bytes.data(), bytes.size());
    }
  } catch (...) {
    for (void* p : buffers_) backend_.release(p);
    throw;
  }
}

Workspace::~Workspace() {
  lane_thread_.reset();  // idle between runs: joins at once
  try {
    backend_.synchronize();
  } catch (...) {
    // Freeing after a failed kernel is still the right thing to do.
  }
  for (void* p : buffers_) backend_.release(p);
}

MatRef Workspace::ref_in(std::span<void* const> buffers, const View& v) const {
  const BufferSpec& b = plan_.buffers.at(static_cast<std::size_t>(v.buffer));
  if (buffers.size() != plan_.buffers.size()) {
    throw std::logic_error("plan " + plan_.op + "/" + plan_.variant + " has " +
                           std::to_string(plan_.buffers.size()) + " buffers, got " +
                           std::to_string(buffers.size()));
  }
  auto* base = static_cast<std::byte*>(buffers[static_cast<std::size_t>(v.buffer)]);
  const std::size_t offset =
      static_cast<std::size_t>(v.row0 * b.cols + v.col0) * dtype_size(plan_.dtype);
  return MatRef{base + offset, plan_.dtype, v.rows, v.cols, b.cols};
}

QuantRef Workspace::qref(std::span<void* const> buffers, const QuantView& q,
                         QuantDType dtype) const {
  const BufferSpec& b = plan_.buffers.at(static_cast<std::size_t>(q.codes.buffer));
  const BufferSpec& sb = plan_.buffers.at(static_cast<std::size_t>(q.scales));
  // A window of whole rows (a member of a grouped scaled GEMM): its scales are the grid's rows of
  // those rows, contiguous for every kind (block windows start on a 128-row block).
  const QuantMat grid{dtype, q.kind, b.rows, b.cols, {}, {}};
  if (b.store != BufferSpec::Store::codes || sb.store != BufferSpec::Store::scales ||
      q.codes.col0 != 0 || q.codes.cols != b.cols || q.codes.row0 < 0 ||
      q.codes.row0 + q.codes.rows > b.rows ||
      (q.kind != ScaleKind::tensor && q.codes.row0 % grid.tile_rows() != 0))
    throw std::logic_error("plan " + plan_.op + "/" + plan_.variant + ": " + b.name +
                           " is not a codes buffer (whole rows of it) with a scales buffer");
  const std::int64_t scale_row0 = q.kind == ScaleKind::tensor ? 0 : q.codes.row0 / grid.tile_rows();
  return QuantRef{static_cast<std::uint8_t*>(buffers[static_cast<std::size_t>(q.codes.buffer)]) +
                      q.codes.row0 * b.cols,
                  q.codes.rows,
                  b.cols,
                  b.cols,
                  static_cast<float*>(buffers[static_cast<std::size_t>(q.scales)]) +
                      scale_row0 * grid.scale_cols(),
                  q.kind,
                  dtype};
}

void Workspace::fill_quantized(int index, const RandomTensors& random,
                               const TensorSource* weights) {
  const BufferSpec& b = plan_.buffers[static_cast<std::size_t>(index)];
  const BufferSpec::Quantized& q = *b.quantized;
  const TensorSource& source = source_of(b, random, weights);
  std::vector<std::vector<float>> parts;
  for (std::size_t p = 0; p < b.parts.size(); ++p) {
    // Rounded to the plan's dtype first: the unquantized values the reference sees.
    WindowRequest r = part_request(plan_, b, p);
    if (b.store == BufferSpec::Store::scales) r.cols = r.logical_cols;  // all of x, one scale
    const auto values = source.window(r);
    parts.push_back(decode(encode(values, plan_.dtype).data(), values.size(), plan_.dtype));
  }
  const auto put = [&](int buffer, const void* data, std::size_t bytes) {
    if (bytes != plan_.buffer_bytes(buffer))
      throw std::logic_error("buffer " + plan_.buffers[static_cast<std::size_t>(buffer)].name +
                             ": " + std::to_string(bytes) + " bytes for " +
                             std::to_string(plan_.buffer_bytes(buffer)));
    backend_.upload(buffers_[static_cast<std::size_t>(buffer)], data, bytes);
  };
  if (b.store == BufferSpec::Store::scales) {  // a static scale, calibrated on its parts
    if (const auto stored = stored_static_scale(plan_, weights)) {  // a checkpoint's input_scale
      put(index, &*stored, sizeof(float));
      return;
    }
    float amax = 0;
    for (const auto& part : parts)
      for (float v : part) amax = std::max(amax, std::fabs(v));
    const float scale = dynamic_scale(q.dtype, amax);
    put(index, &scale, sizeof scale);
    return;
  }
  const auto stored = stored_quantized_buffer(plan_, b, weights);
  const QuantMat m =
      stored ? *stored : quantize_shards(parts, b.part_rows, b.cols, q.dtype, q.kind, q.fusion);
  put(index, m.codes.data(), m.codes.size());
  put(q.scales, m.scales.data(), m.scales.size() * sizeof(float));
}

std::int64_t Workspace::collectives_issued_on_this_thread() { return collectives_on_this_thread; }

void Workspace::execute(const Step& step, std::span<void* const> buffers, Communicator* comm) {
  const auto ref = [&](const View& v) { return ref_in(buffers, v); };
  const auto gemm_args = [&](const GemmStep& g) {
    return GemmArgs{ref(g.x), ref(g.w), ref(g.y), g.has_bias() ? ref(g.bias) : MatRef{}};
  };
  std::visit(
      [&](const auto& s) {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, GemmStep>) {
          backend_.gemm(gemm_args(s));
        } else if constexpr (std::is_same_v<T, GroupedGemmStep>) {
          std::vector<GemmArgs> args;
          for (const auto& g : s.gemms) args.push_back(gemm_args(g));
          s.batched ? backend_.gemm_batched(args) : backend_.gemm_grouped(args);
        } else if constexpr (std::is_same_v<T, ActAndMulStep>) {
          backend_.act_and_mul({ref(s.gate), ref(s.up), ref(s.out), s.act, s.limit, s.col_stride});
        } else if constexpr (std::is_same_v<T, BiasAddStep>) {
          std::vector<BiasAddArgs> args;
          for (const auto& m : s.members) args.push_back({ref(m.y), ref(m.bias)});
          backend_.bias_add(args);
        } else if constexpr (std::is_same_v<T, RmsNormStep>) {
          backend_.rms_norm(ref(s.x), ref(s.weight), ref(s.out), s.eps);
        } else if constexpr (std::is_same_v<T, QuantizeStep>) {
          backend_.quantize({ref(s.x), qref(buffers, s.out, s.dtype), s.static_scale});
        } else if constexpr (std::is_same_v<T, ScaledGemmStep>) {
          backend_.scaled_gemm(
              {qref(buffers, s.x, s.dtype), qref(buffers, s.w, s.dtype), ref(s.y)});
        } else if constexpr (std::is_same_v<T, GroupedScaledGemmStep>) {
          std::vector<ScaledGemmArgs> args;
          for (const auto& g : s.gemms)
            args.push_back({qref(buffers, g.x, g.dtype), qref(buffers, g.w, g.dtype), ref(g.y)});
          backend_.scaled_gemm_grouped(args);
        } else if constexpr (std::is_same_v<T, GatherRowsStep>) {
          backend_.gather_rows(ref(s.src), ref(s.dst), s.rows, s.scale);
        } else if constexpr (std::is_same_v<T, ScatterAddStep>) {
          backend_.scatter_add(ref(s.src), ref(s.dst), s.rows, s.scale, s.zero_dst);
        } else if constexpr (std::is_same_v<T, SigmoidGateRowsStep>) {
          backend_.sigmoid_gate_rows(ref(s.x), ref(s.gate));
        } else {
          if (comm == nullptr) {
            throw std::logic_error("plan " + plan_.op + "/" + plan_.variant +
                                   " has a collective step but no communicator was given");
          }
          if constexpr (std::is_same_v<T, AllReduceStep>) {
            comm->all_reduce(ref(s.data));
          } else if constexpr (std::is_same_v<T, AllGatherStep>) {
            comm->all_gather(ref(s.src), ref(s.dst));
          } else if constexpr (std::is_same_v<T, ReduceScatterStep>) {
            comm->reduce_scatter(ref(s.src), ref(s.dst));
          } else if constexpr (std::is_same_v<T, AllGatherRowsStep>) {
            comm->all_gather_rows(ref(s.src), ref(s.dst));
          } else {
            static_assert(std::is_same_v<T, AllToAllRowsStep>);
            comm->all_to_all_rows(ref(s.src), s.send_rows, ref(s.dst), s.recv_rows);
          }
        }
      },
      step);
}

void Workspace::run_device_lanes(std::span<void* const> buffers, Communicator* comm) {
  // Event ids: a step's index for the steps another lane waits for; then the fork and the join.
  const int fork = static_cast<int>(plan_.steps.size()), join = fork + 1;
  struct BackToLane0 {
    Backend& b;
    ~BackToLane0() { b.set_lane(0); }
  } back{backend_};
  backend_.set_lane(0);
  backend_.lane_signal(fork);
  bool lane1_started = false;
  for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
    const StepOrder& o = plan_.order_of(i);
    backend_.set_lane(o.lane);
    if (o.lane == 1 && !lane1_started) {
      backend_.lane_wait(fork);  // lane 1 starts after what lane 0 had before this run
      lane1_started = true;
    }
    for (int j : o.after) {
      if (plan_.order_of(static_cast<std::size_t>(j)).lane != o.lane) backend_.lane_wait(j);
    }
    execute(plan_.steps[i], buffers, comm);
    if (signalled_[i]) backend_.lane_signal(static_cast<int>(i));
  }
  if (lane1_started) {
    backend_.set_lane(1);
    backend_.lane_signal(join);
    backend_.set_lane(0);
    backend_.lane_wait(join);  // lane 0 ends after lane 1: the run ends on one stream
  }
}

void Workspace::run_on(std::span<void* const> buffers, Communicator* comm) {
  if (buffers.size() != plan_.buffers.size()) {
    throw std::logic_error("plan " + plan_.op + "/" + plan_.variant + " has " +
                           std::to_string(plan_.buffers.size()) + " buffers, got " +
                           std::to_string(buffers.size()));
  }
  if (comm != nullptr && collective_steps_ > 0) comm->reserve(max_message_bytes_);
  if (!uses_lane1_) {
    for (const Step& step : plan_.steps) execute(step, buffers, comm);
  } else if (backend_.has_device_lanes()) {
    run_device_lanes(buffers, comm);
  } else {
    if (!lane_thread_) lane_thread_ = std::make_unique<LaneThread>(*this);
    lane_thread_->run(buffers, comm);
  }
  // Counted for the calling thread whichever lane issued them (the CPU launch count).
  collectives_on_this_thread += collective_steps_;
}

std::vector<float> Workspace::read(const View& v) {
  backend_.synchronize();
  const BufferSpec& b = plan_.buffers.at(static_cast<std::size_t>(v.buffer));
  const std::size_t elem = dtype_size(plan_.dtype);
  std::vector<std::byte> raw(plan_.buffer_bytes(v.buffer));
  backend_.download(raw.data(), buffers_.at(static_cast<std::size_t>(v.buffer)), raw.size());
  const auto all = decode(raw.data(), raw.size() / elem, plan_.dtype);
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(v.rows * v.cols));
  for (std::int64_t r = v.row0; r < v.row0 + v.rows; ++r) {
    const auto* row = all.data() + r * b.cols + v.col0;
    out.insert(out.end(), row, row + v.cols);
  }
  return out;
}

}  // namespace fusebench
