#include "fusebench/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "fusebench/checked_size.hpp"
#include "fusebench/input_files.hpp"

namespace fusebench {
namespace {

struct DtypeName {
  TensorDtype dtype;
  std::string_view name;
  int bits;
};

constexpr std::array<DtypeName, 20> kDtypes = {{
    {TensorDtype::BOOL, "BOOL", 8},       {TensorDtype::U8, "U8", 8},
    {TensorDtype::I8, "I8", 8},           {TensorDtype::I16, "I16", 16},
    {TensorDtype::U16, "U16", 16},        {TensorDtype::I32, "I32", 32},
    {TensorDtype::U32, "U32", 32},        {TensorDtype::I64, "I64", 64},
    {TensorDtype::U64, "U64", 64},        {TensorDtype::F4, "F4", 4},
    {TensorDtype::F6_E2M3, "F6_E2M3", 6}, {TensorDtype::F6_E3M2, "F6_E3M2", 6},
    {TensorDtype::F8_E5M2, "F8_E5M2", 8}, {TensorDtype::F8_E4M3, "F8_E4M3", 8},
    {TensorDtype::F8_E8M0, "F8_E8M0", 8}, {TensorDtype::F16, "F16", 16},
    {TensorDtype::BF16, "BF16", 16},      {TensorDtype::F32, "F32", 32},
    {TensorDtype::F64, "F64", 64},        {TensorDtype::C64, "C64", 64},
}};

// The reference implementation refuses larger headers; so do we (and it bounds our parse).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

std::string json_type(const nlohmann::json& v) {
  if (v.is_number_float()) return "a fractional or out-of-range number " + v.dump();
  if (v.is_number_integer() && !v.is_number_unsigned()) return "a negative number " + v.dump();
  const std::string type = v.type_name();
  return (type == "array" || type == "object" ? "an " : "a ") + type;
}

// A non-negative JSON integer, or nullopt (negative, fractional, too large, not a number).
std::optional<std::uint64_t> as_u64(const nlohmann::json& v) {
  if (!v.is_number_unsigned()) return std::nullopt;
  return v.get<std::uint64_t>();
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  std::string out = "[";  // appended piecewise: "[" + to_string() trips GCC 12's -Wrestrict
  out += std::to_string(begin);
  out += ", ";
  out += std::to_string(end);
  return out + ")";
}

[[noreturn]] void fail_file(const std::string& label, const std::string& what) {
  throw CheckpointError(label + ": " + what);
}

class HeaderReader {
 public:
  HeaderReader(const std::string& label, std::uint64_t data_bytes)
      : label_(label), data_bytes_(data_bytes) {}

  [[noreturn]] void fail(const std::string& what) const { fail_file(label_, what); }
  [[noreturn]] void fail(const std::string& tensor, const std::string& what) const {
    throw CheckpointError(label_ + ": tensor " + quote_name(tensor) + ": " + what);
  }

  TensorInfo tensor(const std::string& name, const nlohmann::json& entry) const {
    if (!entry.is_object()) fail(name, "entry is " + json_type(entry) + ", not an object");
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) fail(name, std::string("has no '") + key + "'");
    }
    TensorInfo info;
    info.name = name;
    const auto& dtype = entry.at("dtype");
    if (!dtype.is_string()) fail(name, "dtype is " + json_type(dtype) + ", not a string");
    const auto parsed = parse_tensor_dtype(dtype.get<std::string>());
    if (!parsed) {
      fail(name, "unknown dtype " + quote_name(dtype.get<std::string>()) +
                     " (safetensors dtypes: " + known_tensor_dtypes() + ")");
    }
    info.dtype = *parsed;

    const auto& shape = entry.at("shape");
    if (!shape.is_array()) fail(name, "shape is " + json_type(shape) + ", not an array");
    for (const auto& d : shape) {
      const auto dim = as_u64(d);
      if (!dim || *dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail(name, "shape " + shape.dump() + " has " + json_type(d) +
                       " (dimensions are non-negative integers)");
      }
      info.shape.push_back(static_cast<std::int64_t>(*dim));
    }
    // Checked products (checked_size.hpp): a shape whose size wraps would pass the byte check.
    std::uint64_t elements = 1, bits = 0;
    const std::string what = "shape " + shape.dump() + " of " + std::string(to_string(info.dtype));
    try {
      for (const std::int64_t d : info.shape) elements = size_mul(elements, d, what + " elements");
      bits = size_mul(elements, dtype_bits(info.dtype), what + " bits");
    } catch (const SizeOverflow& e) {
      fail(name, e.what());
    }
    if (bits % 8 != 0) {
      fail(name, std::to_string(elements) + " elements of " + std::string(to_string(info.dtype)) +
                     " are not a whole number of bytes");
    }

    const auto& offsets = entry.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2) {
      fail(name, "data_offsets " + offsets.dump() + " is not a [begin, end] pair");
    }
    const auto begin = as_u64(offsets[0]), end = as_u64(offsets[1]);
    if (!begin || !end || *begin > *end) {
      fail(name, "data_offsets " + offsets.dump() +
                     " is not a pair of non-negative integers with begin <= end");
    }
    info.begin = *begin;
    info.end = *end;
    if (info.end > data_bytes_) {
      fail(name, "data_offsets " + range_text(info.begin, info.end) +
                     " end past the end of the data section (" + std::to_string(data_bytes_) +
                     " bytes after the header): the file is truncated or the offsets are wrong");
    }
    if (info.end - info.begin != bits / 8) {
      fail(name, "shape " + shape.dump() + " of " + std::string(to_string(info.dtype)) + " needs " +
                     std::to_string(bits / 8) + " bytes, but data_offsets " +
                     range_text(info.begin, info.end) + " hold " +
                     std::to_string(info.end - info.begin));
    }
    return info;
  }

  std::map<std::string, std::string> metadata(const nlohmann::json& entry) const {
    std::map<std::string, std::string> out;
    if (entry.is_null()) return out;
    if (!entry.is_object()) fail("__metadata__ is " + json_type(entry) + ", not an object");
    for (const auto& [key, value] : entry.items()) {
      if (!value.is_string()) {
        fail("__metadata__ value of " + quote_name(key) + " is " + json_type(value) +
             " (the format allows strings only)");
      }
      out[key] = value.get<std::string>();
    }
    return out;
  }

  // The tensors must cover the data section exactly once, in some order.
  void check_layout(const std::map<std::string, TensorInfo, std::less<>>& tensors) const {
    std::vector<const TensorInfo*> by_offset;
    for (const auto& [name, info] : tensors) by_offset.push_back(&info);
    std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    std::uint64_t covered = 0;
    const TensorInfo* previous = nullptr;
    for (const TensorInfo* t : by_offset) {
      if (t->begin < covered) {
        fail(t->name, "bytes " + range_text(t->begin, t->end) + " overlap tensor " +
                          quote_name(previous->name) + " at " +
                          range_text(previous->begin, previous->end));
      }
      if (t->begin > covered) {
        fail(t->name, "starts at byte " + std::to_string(t->begin) +
                          " but the tensors before it end at " + std::to_string(covered) +
                          ": bytes " + range_text(covered, t->begin) +
                          " of the data belong to no tensor");
      }
      covered = t->end;
      if (t->end > t->begin) previous = t;  // an empty tensor cannot be overlapped
    }
    if (covered != data_bytes_) {
      fail("the tensors end at byte " + std::to_string(covered) + " of a data section of " +
           std::to_string(data_bytes_) + " bytes: " + std::to_string(data_bytes_ - covered) +
           " trailing bytes belong to no tensor");
    }
  }

 private:
  const std::string& label_;
  std::uint64_t data_bytes_;
};

}  // namespace

std::string_view to_string(TensorDtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

std::optional<TensorDtype> parse_tensor_dtype(std::string_view name) {
  for (const auto& d : kDtypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

int dtype_bits(TensorDtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.bits;
  }
  return 0;
}

std::string known_tensor_dtypes() {
  std::string out;
  for (const auto& d : kDtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

std::uint64_t TensorInfo::elements() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);  // validated by parse_safetensors
  return n;
}

SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& label) {
  const auto fail = [&label](const std::string& what) { fail_file(label, what); };
  if (file.size() < 8) {
    fail(std::to_string(file.size()) +
         " bytes: too short for a safetensors file (it starts with an 8-byte header length)");
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | std::to_integer<std::uint64_t>(file[static_cast<std::size_t>(i)]);
  // A JSON file (an index named as a shard, a config) reads as a header length of about 8e18;
  // a real header of 123 bytes starts with '{' too, so only a length past the file says JSON.
  if (n > file.size() - 8 && file[0] == std::byte{'{'}) {
    fail(
        "starts with '{' and is not a safetensors file but JSON (an index or a config?): a "
        "safetensors file starts with an 8-byte little-endian header length, here " +
        std::to_string(n) + " for a file of " + std::to_string(file.size()) + " bytes");
  }
  if (n > file.size() - 8) {
    fail("header length " + std::to_string(n) + " is larger than the rest of the file (" +
         std::to_string(file.size() - 8) +
         " bytes after the length): truncated, or not a safetensors file");
  }
  if (n > kMaxHeaderBytes) {
    fail("header length " + std::to_string(n) + " exceeds the format's limit of " +
         std::to_string(kMaxHeaderBytes) + " bytes");
  }
  SafetensorsHeader header;
  header.header_bytes = n;
  HeaderReader reader(label, file.size() - 8 - n);

  const auto* text = reinterpret_cast<const char*>(file.data() + 8);
  // The format nests two containers deep (root -> tensor -> shape); deeper input is refused while
  // parsing, and duplicate tensor names (JSON would keep the last silently) are refused too.
  std::set<std::string, std::less<>> names;
  const auto callback = [&](int depth, nlohmann::json::parse_event_t event,
                            nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth > 2) {
      fail("header nests JSON deeper than the format allows");
    }
    if (event == E::key && depth == 1 && !names.insert(parsed.get<std::string>()).second) {
      fail("tensor " + quote_name(parsed.get<std::string>()) + " appears twice in the header");
    }
    return true;
  };
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text, text + n, callback);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("header is not valid JSON: ") + printable(e.what()));
  }
  if (!root.is_object()) fail("header is " + json_type(root) + ", not a JSON object");
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      header.metadata = reader.metadata(entry);
    } else {
      header.tensors.emplace(name, reader.tensor(name, entry));
    }
  }
  reader.check_layout(header.tensors);
  return header;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // Mapped, not read: the size limit of read_input_file does not apply (a shard is gigabytes),
  // but it is one of the run's inputs, which no output may replace.
  register_input("a checkpoint shard", path, InputNamedBy::reader);
  // O_NONBLOCK: opening a fifo must not wait for a writer (it is refused below, as not regular).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw CheckpointError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    throw CheckpointError(path + ": not a regular file" +
                          (err ? std::string(" (") + std::strerror(err) + ")" : ""));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw CheckpointError(path + ": cannot map " + std::to_string(size_) +
                            " bytes: " + std::strerror(err));
    }
    map_ = static_cast<const std::byte*>(m);
  }
  ::close(fd);  // the mapping stays valid
  try {
    header_ = parse_safetensors({map_, size_}, path);
  } catch (...) {
    if (map_) ::munmap(const_cast<std::byte*>(map_), size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<std::byte*>(map_), size_);
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = header_.tensors.find(name);
  return it == header_.tensors.end() ? nullptr : &it->second;
}

const TensorInfo& SafetensorsFile::tensor(std::string_view name) const {
  if (const auto* info = find(name)) return *info;
  throw CheckpointError(path_ + ": no tensor " + quote_name(name) + " (the file holds " +
                        std::to_string(header_.tensors.size()) + " tensors)");
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& info) const {
  // Offsets were validated against the file size when the header was parsed.
  return {map_ + header_.data_offset() + info.begin,
          static_cast<std::size_t>(info.end - info.begin)};
}

std::span<const std::byte> SafetensorsFile::header_json() const {
  return {map_ + 8, static_cast<std::size_t>(header_.header_bytes)};
}

}  // namespace fusebench
