#include "tfm/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "tfm/core/error.h"

namespace tfm {
namespace {

// The reference library refuses larger headers (safetensors/src/tensor.rs, MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kLengthBytes = 8;

// Every dtype code the format defines, in the order of the reference library's Dtype enum. The writer lays
// tensors out by this order, last first (widest alignment first), as the reference library does.
constexpr std::array<std::string_view, 22> kCodes = {
    "BOOL",    "F4",          "F6_E2M3",     "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
    "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16",     "U16", "F16", "BF16",    "I32",
    "U32",     "F32",         "C64",         "F64",     "I64", "U64"};

size_t code_rank(DType t) {
  const std::string_view code = safetensors_dtype_name(t);
  return static_cast<size_t>(std::find(kCodes.begin(), kCodes.end(), code) - kCodes.begin());
}

// Length of the valid UTF-8 prefix of `s` (s.size() when all of it is valid).
size_t valid_utf8_prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len;
    uint32_t min;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, min = 0x10000;
    } else {
      return i;
    }
    if (n - i < len) return i;
    uint32_t cp = c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return n;
}

// A JSON value as it appears in an error message, cut short: a hostile header can make it huge.
std::string excerpt(const json::Value& v) {
  constexpr size_t kMax = 60;
  std::string text = json::dump_compact(v);
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

// Reads header fields, prefixing every error with the file and, once known, the tensor.
class HeaderReader {
 public:
  explicit HeaderReader(const std::string& path) : path_(path) {}

  template <typename... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw_error("safetensors file '", path_, "': ", std::forward<Parts>(parts)...);
  }
  template <typename... Parts>
  [[noreturn]] void fail_tensor(const std::string& name, Parts&&... parts) const {
    fail("tensor '", name, "': ", std::forward<Parts>(parts)...);
  }

  uint64_t non_negative_int(const std::string& name, std::string_view field, const json::Value& v) const {
    if (!v.is_int() || v.as_int() < 0) {
      fail_tensor(name, field, " must hold non-negative integers, found ", excerpt(v));
    }
    return static_cast<uint64_t>(v.as_int());
  }

  const json::Value& field(const std::string& name, const json::Value& entry, std::string_view key) const {
    const json::Value* v = entry.find(key);
    if (!v) fail_tensor(name, "missing \"", key, "\"");
    return *v;
  }

  DType dtype(const std::string& name, const json::Value& entry) const {
    const json::Value& v = field(name, entry, "dtype");
    if (!v.is_string()) fail_tensor(name, "\"dtype\" must be a string, found ", excerpt(v));
    DType t;
    if (parse_safetensors_dtype(v.as_string(), &t)) return t;
    if (std::find(kCodes.begin(), kCodes.end(), v.as_string()) != kCodes.end()) {
      fail_tensor(name, "unsupported dtype ", v.as_string(), " (sub-byte types are not implemented in tfm)");
    }
    fail_tensor(name, "unknown dtype '", v.as_string(), "'");
  }

  Shape shape(const std::string& name, const json::Value& entry) const {
    const json::Value& v = field(name, entry, "shape");
    if (!v.is_array()) fail_tensor(name, "\"shape\" must be an array, found ", excerpt(v));
    Shape shape;
    for (const json::Value& d : v.as_array())
      shape.push_back(static_cast<int64_t>(non_negative_int(name, "\"shape\"", d)));
    return shape;
  }

  std::pair<uint64_t, uint64_t> offsets(const std::string& name, const json::Value& entry) const {
    const json::Value& v = field(name, entry, "data_offsets");
    if (!v.is_array() || v.size() != 2) {
      fail_tensor(name, "\"data_offsets\" must be [begin, end], found ", excerpt(v));
    }
    const uint64_t begin = non_negative_int(name, "\"data_offsets\"", v[0]);
    const uint64_t end = non_negative_int(name, "\"data_offsets\"", v[1]);
    if (begin > end) fail_tensor(name, "data_offsets [", begin, ", ", end, "] begin after end");
    return {begin, end};
  }

  // Bytes the tensor needs. Every stride a tensor of this shape has must fit in int64 too, so the product of
  // the non-zero dimensions is bounded even when a zero dimension makes the tensor empty (the reference
  // library accepts such shapes; tfm refuses them as absurd rather than overflow computing strides).
  uint64_t byte_size(const std::string& name, const Shape& shape, DType t) const {
    uint64_t n = dtype_size(t);
    bool empty = false;
    for (int64_t d : shape) {
      if (d == 0) {
        empty = true;
      } else if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) || n > uint64_t{INT64_MAX}) {
        fail_tensor(name, "shape ", shape_str(shape), " overflows the size of a buffer");
      }
    }
    return empty ? 0 : n;
  }

  json::Value metadata(const json::Value& v) const {
    if (v.is_null()) return json::Object{};
    if (!v.is_object()) fail("\"__metadata__\" must be an object of strings, found ", excerpt(v));
    for (const auto& [key, value] : v.as_object()) {
      if (!value.is_string()) {
        fail("\"__metadata__\" entry '", key, "' must be a string, found ", excerpt(value));
      }
    }
    return v;
  }

 private:
  const std::string& path_;
};

}  // namespace

struct SafetensorsFile::Mapping {
  void* address = nullptr;
  size_t size = 0;
  int fd = -1;  // kept for read(), which copies without touching the mapping's pages
  Mapping(void* a, size_t s, int f) : address(a), size(s), fd(f) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    munmap(address, size);
    ::close(fd);
  }
  const char* bytes() const { return static_cast<const char*>(address); }
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  HeaderReader reader(path);
  // O_NONBLOCK: a FIFO given as the path must not block open(); it is then refused as not a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) reader.fail("cannot open: ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    reader.fail("not a regular file");
  }
  const size_t file_size = static_cast<size_t>(st.st_size);
  if (file_size < kLengthBytes) {
    ::close(fd);
    reader.fail("file is ", file_size, " bytes, too short for the 8-byte header length");
  }
  // Private and writable: a view's writes (a cpu model trained in its file's dtype) go to pages of this
  // process, copied on write, and never reach the file; pages never written stay shared with the page cache.
  void* address = mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
  const int map_errno = errno;
  if (address == MAP_FAILED) {
    ::close(fd);
    reader.fail("cannot map: ", std::strerror(map_errno));
  }

  SafetensorsFile file;
  file.path_ = path;
  file.mapping_ = std::make_shared<Mapping>(address, file_size, fd);
  const char* bytes = file.mapping_->bytes();

  uint64_t header_size = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) {
    header_size |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  if (header_size > kMaxHeaderBytes) {
    reader.fail("header length ", header_size, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  }
  if (kLengthBytes + header_size > file_size) {
    reader.fail("header length ", header_size, " runs past the end of the file (", file_size, " bytes)");
  }
  const std::string_view text(bytes + kLengthBytes, header_size);
  if (const size_t valid = valid_utf8_prefix(text); valid != text.size()) {
    reader.fail("header is not valid UTF-8 (at header byte ", valid, ")");
  }
  json::Value header;
  try {
    header = json::parse(text);
  } catch (const Error& e) {
    reader.fail("header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) reader.fail("header is not a JSON object");

  const uint64_t data_size = file_size - kLengthBytes - header_size;
  const size_t data_start = kLengthBytes + header_size;
  file.metadata_ = json::Object{};
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [name, entry] : header.as_object()) {
    if (name == "__metadata__") {
      file.metadata_ = reader.metadata(entry);
      continue;
    }
    if (!entry.is_object()) reader.fail_tensor(name, "entry must be an object, found ", excerpt(entry));
    TensorInfo info{name, reader.dtype(name, entry), reader.shape(name, entry)};
    const auto [begin, end] = reader.offsets(name, entry);
    const uint64_t expected = reader.byte_size(name, info.shape, info.dtype);
    if (end - begin != expected) {
      reader.fail_tensor(name, "data_offsets [", begin, ", ", end, "] span ", end - begin, " bytes but ",
                         dtype_name(info.dtype), shape_str(info.shape), " needs ", expected);
    }
    if (end > data_size) {
      reader.fail_tensor(name, "data_offsets [", begin, ", ", end, "] run past the end of the data (",
                         data_size, " bytes)");
    }
    info.offset = data_start + begin;
    info.nbytes = expected;
    spans.emplace_back(begin, end);
    file.tensors_.push_back(std::move(info));
  }

  // The tensors must tile the data exactly: sorted by offsets, each begins where the previous ended.
  std::vector<size_t> order(spans.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return spans[a] < spans[b]; });
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (size_t i : order) {
    const std::string& name = file.tensors_[i].name;
    if (spans[i].first < covered) {
      reader.fail_tensor(name, "data_offsets [", spans[i].first, ", ", spans[i].second, "] overlap tensor '",
                         *previous, "'");
    }
    if (spans[i].first > covered) {
      reader.fail_tensor(name, "data_offsets [", spans[i].first, ", ", spans[i].second, "] leave a gap of ",
                         spans[i].first - covered, " bytes before it");
    }
    covered = spans[i].second;
    previous = &name;
  }
  if (covered != data_size) {
    reader.fail(data_size - covered, " bytes after the last tensor belong to no tensor (data is ", data_size,
                " bytes, tensors cover ", covered, ")");
  }
  for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_.emplace(file.tensors_[i].name, i);
  return file;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Tensor SafetensorsFile::get(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (!info) throw_error("safetensors file '", path_, "' has no tensor '", name, "'");
  const char* bytes = mapping_->bytes() + info->offset;
  // The mapping is page-aligned, so this is the file offset's alignment. Python's writer keeps every tensor
  // aligned; another writer may not, and kernels must not see misaligned elements: those get an aligned copy.
  if (info->offset % dtype_size(info->dtype) != 0) {
    Tensor copy = Tensor::cpu(info->shape, info->dtype);
    std::memcpy(copy.raw(), bytes, info->nbytes);
    return copy;
  }
  void* data = const_cast<char*>(bytes);
  auto storage = std::make_shared<Storage>(data, info->nbytes, Device{}, [mapping = mapping_](void*) {});
  return Tensor(std::move(storage), info->shape, info->dtype);
}

namespace {
// The whole pages inside [begin, begin + bytes) of a page-aligned mapping; neighbours' pages are left alone.
std::pair<char*, size_t> inner_pages(const char* begin, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
  return {reinterpret_cast<char*>(first), last > first ? last - first : 0};
}
}  // namespace

void SafetensorsFile::read(std::string_view name, size_t begin, void* dst, size_t bytes) const {
  const TensorInfo* info = find(name);
  if (!info) throw_error("safetensors file '", path_, "' has no tensor '", name, "'");
  check(begin <= info->nbytes && bytes <= info->nbytes - begin, "safetensors file '", path_, "': bytes [", begin,
        ", ", begin + bytes, ") are outside tensor '", name, "' (", info->nbytes, " bytes)");
  char* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = pread(mapping_->fd, out + done, bytes - done, static_cast<off_t>(info->offset + begin + done));
    if (n < 0 && errno == EINTR) continue;
    check(n > 0, "safetensors file '", path_, "': cannot read tensor '", name, "': ",
          n < 0 ? std::strerror(errno) : "the file was cut short");
    done += static_cast<size_t>(n);
  }
}

void SafetensorsFile::release(std::string_view name, size_t begin, size_t end) const {
  const TensorInfo* info = find(name);
  if (!info) return;
  end = end == 0 ? info->nbytes : std::min(end, info->nbytes);
  if (begin >= end) return;
  const auto [pages, bytes] = inner_pages(mapping_->bytes() + info->offset + begin, end - begin);
  if (bytes > 0) madvise(pages, bytes, MADV_DONTNEED);  // pages not written: nothing is lost
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const json::Object& metadata) {
  auto fail = [&](const auto&... parts) { throw_error("writing safetensors file '", path, "': ", parts...); };
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail("'__metadata__' cannot name a tensor");
    if (!t.defined()) fail("tensor '", name, "' is undefined");
    if (t.device().type != DeviceType::cpu) {
      fail("tensor '", name, "' is on ", t.device().str(), ", not the cpu");
    }
    if (!t.is_contiguous()) fail("tensor '", name, "' is not contiguous");
    if (safetensors_dtype_name(t.dtype()).empty()) {
      fail("tensor '", name, "' has dtype ", dtype_name(t.dtype()), ", which safetensors cannot store");
    }
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t ra = code_rank(tensors[a].second.dtype()), rb = code_rank(tensors[b].second.dtype());
    return ra != rb ? ra > rb : tensors[a].first < tensors[b].first;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    if (tensors[order[i]].first == tensors[order[i - 1]].first) {
      fail("tensor '", tensors[order[i]].first, "' given twice");
    }
  }

  json::Object header;
  if (!metadata.empty()) {
    for (const auto& [key, value] : metadata) {
      if (!value.is_string()) fail("metadata '", key, "' must be a string");
    }
    header.emplace_back("__metadata__", metadata);
  }
  uint64_t offset = 0;
  for (size_t i : order) {
    const Tensor& t = tensors[i].second;
    json::Array shape;
    for (int64_t d : t.shape()) shape.emplace_back(d);
    const uint64_t end = offset + t.nbytes();
    header.emplace_back(tensors[i].first,
                        json::Object{{"dtype", std::string(safetensors_dtype_name(t.dtype()))},
                                     {"shape", std::move(shape)},
                                     {"data_offsets", json::Array{json::Value(offset), json::Value(end)}}});
    offset = end;
  }
  std::string text = json::dump_compact(header);
  text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');

  const std::string temporary = path + ".tmp";
  std::FILE* out = std::fopen(temporary.c_str(), "wb");
  if (!out) fail("cannot create '", temporary, "': ", std::strerror(errno));
  std::array<char, kLengthBytes> length;
  for (size_t i = 0; i < kLengthBytes; ++i) length[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  bool ok = std::fwrite(length.data(), 1, length.size(), out) == length.size() &&
            std::fwrite(text.data(), 1, text.size(), out) == text.size();
  for (size_t i : order) {
    const Tensor& t = tensors[i].second;
    ok = ok && std::fwrite(t.raw(), 1, t.nbytes(), out) == t.nbytes();
  }
  ok = (std::fclose(out) == 0) && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    fail("write failed: ", std::strerror(error));
  }
}

}  // namespace tfm
