// Shared by the generate tests: the recorded Transformers references and fake decoders.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::testing {

// A reference file of tests/generate, parsed; nullopt when it has not been made yet (the torch-based one is
// made on the GPU machine by tests/fixtures/make_generation_refs.py).
inline std::optional<json::Value> load_refs(const std::string& name) {
  const std::string path = std::string(TFM_SOURCE_DIR) + "/tests/generate/" + name;
  if (!std::filesystem::exists(path)) return std::nullopt;
  return json::parse_file(path);
}

inline std::vector<int64_t> ids_of(const json::Value& v) {
  std::vector<int64_t> out;
  for (const json::Value& x : v.as_array()) out.push_back(x.as_int());
  return out;
}

inline std::vector<float> floats_of(const json::Value& v) {
  std::vector<float> out;
  for (const json::Value& x : v.as_array()) out.push_back(static_cast<float>(x.as_double()));
  return out;
}

// Replaces every byte that does not belong to a well-formed UTF-8 character with U+FFFD, one per maximal
// invalid prefix, as Rust's String::from_utf8_lossy (which the tokenizers library's decoders use).
inline std::string utf8_lossy(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  while (i < bytes.size()) {
    const unsigned char c = byte(i);
    size_t len = c < 0x80                   ? 1
                 : (c >= 0xC2 && c <= 0xDF) ? 2
                 : (c >= 0xE0 && c <= 0xEF) ? 3
                 : (c >= 0xF0 && c <= 0xF4) ? 4
                                            : 0;
    size_t good = len == 0 ? 0 : 1;  // bytes of a valid prefix of the sequence
    for (size_t k = 1; k < len && i + k < bytes.size(); ++k) {
      const unsigned char d = byte(i + k);
      unsigned char lo = 0x80, hi = 0xBF;
      if (k == 1 && c == 0xE0) lo = 0xA0;
      if (k == 1 && c == 0xED) hi = 0x9F;
      if (k == 1 && c == 0xF0) lo = 0x90;
      if (k == 1 && c == 0xF4) hi = 0x8F;
      if (d < lo || d > hi) break;
      ++good;
    }
    if (len != 0 && good == len) {
      out.append(bytes, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += std::max<size_t>(good, 1);
    }
  }
  return out;
}

// A byte-level decoder over a fixed table: each id's bytes concatenated, then decoded lossily.
struct FakeByteDecoder {
  std::map<int64_t, std::string> bytes;
  std::string operator()(const std::vector<int64_t>& ids) const {
    std::string raw;
    for (int64_t id : ids) raw += bytes.at(id);
    return utf8_lossy(raw);
  }
};

// The decoder of a recorded {"<id>": "<hex bytes>"} table.
inline FakeByteDecoder decoder_from_hex(const json::Value& token_bytes) {
  FakeByteDecoder d;
  for (const auto& [id, hex] : token_bytes.as_object()) {
    std::string bytes;
    const std::string& h = hex.as_string();
    for (size_t i = 0; i + 1 < h.size(); i += 2)
      bytes += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    d.bytes[std::stoll(id)] = bytes;
  }
  return d;
}

}  // namespace tfm::testing
