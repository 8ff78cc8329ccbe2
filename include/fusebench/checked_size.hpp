#pragma once
// Size arithmetic that refuses overflow. Token counts come from the command line and dimensions
// from config.json and checkpoint headers, so element and byte counts formed from them are
// untrusted: a product that wraps around would allocate or index a buffer of the wrong size.
// Every size product goes through these; each names what it was computing, so the refusal says
// which value is too large. The limit is int64's, since plans, views and windows hold int64
// dimensions (and std::size_t holds every such count).
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace fusebench {

// A size beyond kSizeLimit: bad input (exit 2), naming the operands, what they size and the limit.
class SizeOverflow : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

inline constexpr std::uint64_t kSizeLimit =
    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

namespace detail {

// `what` is text, or a callable returning it (built only when a check fails).
template <class What>
std::string describe(const What& what) {
  if constexpr (std::is_invocable_v<const What&>) {
    return std::string(what());
  } else {
    return std::string(what);
  }
}

template <class Int, class What>
std::uint64_t size_operand(Int v, const What& what) {
  static_assert(std::is_integral_v<Int>);
  if constexpr (std::is_signed_v<Int>) {
    // A negative size is a bug upstream, not bad input: the readers refuse negative dimensions.
    if (v < 0) throw std::logic_error(describe(what) + ": negative size " + std::to_string(v));
  }
  return static_cast<std::uint64_t>(v);
}

[[noreturn]] inline void size_overflow(std::uint64_t a, const char* op, std::uint64_t b,
                                       const std::string& what) {
  throw SizeOverflow(what + ": " + std::to_string(a) + op + std::to_string(b) +
                     " exceeds the size limit " + std::to_string(kSizeLimit) + " (2^63-1)");
}

}  // namespace detail

// a * b, or SizeOverflow naming `what` ("buffer 'x' elements", ...) when above kSizeLimit.
template <class A, class B, class What>
std::uint64_t size_mul(A a, B b, const What& what) {
  const std::uint64_t x = detail::size_operand(a, what), y = detail::size_operand(b, what);
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(x, y, &out) || out > kSizeLimit)
    detail::size_overflow(x, " x ", y, detail::describe(what));
  return out;
}

// a + b, or SizeOverflow naming `what` when above kSizeLimit.
template <class A, class B, class What>
std::uint64_t size_add(A a, B b, const What& what) {
  const std::uint64_t x = detail::size_operand(a, what), y = detail::size_operand(b, what);
  std::uint64_t out = 0;
  if (__builtin_add_overflow(x, y, &out) || out > kSizeLimit)
    detail::size_overflow(x, " + ", y, detail::describe(what));
  return out;
}

// size_mul as an int64, for the int64 dimensions of plans and windows (always fits: kSizeLimit).
template <class A, class B, class What>
std::int64_t size_mul_i64(A a, B b, const What& what) {
  return static_cast<std::int64_t>(size_mul(a, b, what));
}

}  // namespace fusebench
