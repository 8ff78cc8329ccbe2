// libFuzzer target: the --routing=file: reader (fusebench::file_routing, through the bounded JSON
// parser of input_files.hpp) on arbitrary bytes, at a token count, expert count and top-k taken
// from the first bytes. std::invalid_argument (the documented refusal, naming the field) is the
// only exception allowed out; an accepted file must give every token k distinct experts in range.
#include <cstddef>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string_view>

#include "fusebench/routing.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::int64_t tokens = 1 + data[0] % 64, experts = 1 + data[1] % 64;
  const std::int64_t top_k = 1 + data[2] % experts;
  const std::string_view text(reinterpret_cast<const char*>(data + 3), size - 3);
  try {
    const auto a = fusebench::file_routing(text, "fuzz.json", tokens, experts, top_k, 1);
    if (static_cast<std::int64_t>(a.expert_ids.size()) != tokens * top_k) __builtin_trap();
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::set<std::int32_t> ids;
      for (std::int64_t i = 0; i < top_k; ++i) {
        const std::int32_t e = a.expert_ids[static_cast<std::size_t>(t * top_k + i)];
        if (e < 0 || e >= experts || !ids.insert(e).second) __builtin_trap();
      }
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
