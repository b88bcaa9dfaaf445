// SHA-256 of bytes and files (through OpenSSL), as lowercase hex: the Hub names LFS files by this digest.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace tfm::io {

// Incremental hashing: feed the bytes in any number of pieces, then read the digest once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void update(std::string_view bytes);
  void update_from_file(const std::string& path);  // all of the file; errors name it
  std::string hex_digest();                        // ends the hashing

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string sha256_hex(std::string_view bytes);
// Errors name the file.
std::string sha256_file_hex(const std::string& path);

}  // namespace tfm::io
