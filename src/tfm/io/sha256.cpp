#include "tfm/io/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <vector>

#include "tfm/core/error.h"

namespace tfm::io {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  check(state_->ctx != nullptr && EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) == 1,
        "sha256: OpenSSL could not start a digest");
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(std::string_view bytes) {
  check(EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size()) == 1,
        "sha256: OpenSSL digest update failed");
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  check(EVP_DigestFinal_ex(state_->ctx, digest, &length) == 1, "sha256: OpenSSL digest failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 hash;
  hash.update(bytes);
  return hash.hex_digest();
}

void Sha256::update_from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open ", path);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    update(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  }
  check(in.eof(), "cannot read ", path);
}

std::string sha256_file_hex(const std::string& path) {
  Sha256 hash;
  hash.update_from_file(path);
  return hash.hex_digest();
}

}  // namespace tfm::io
