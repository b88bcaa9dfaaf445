#include "tfm/backend/cuda/cublas_lt.h"

#include <dlfcn.h>

#include <string>

#include "tfm/core/error.h"

namespace tfm::cuda {
namespace {

template <typename Function>
void resolve(void* library, const std::string& file, const char* name, Function& f) {
  f = reinterpret_cast<Function>(dlsym(library, name));
  if (!f) throw_error("cannot use cuBLASLt (", file, "): ", dlerror());
}

CublasLt open_cublas_lt() {
  // The versioned name first: an unversioned libcublasLt.so is a development link, which may be absent.
  const std::string versioned = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string file = versioned, reasons;
  void* library = nullptr;
  for (const std::string& name : {versioned, std::string("libcublasLt.so")}) {
    if ((library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      file = name;
      break;
    }
    reasons += std::string(reasons.empty() ? "" : "; ") + dlerror();
  }
  if (!library) throw_error("cannot open cuBLASLt, which CUDA matmuls need: ", reasons);
  decltype(&cublasLtGetVersion) get_version;
  resolve(library, file, "cublasLtGetVersion", get_version);
  const size_t version = get_version();
  check(version / 10000 == CUBLAS_VER_MAJOR, "cannot use cuBLASLt (", file, "): it is version ", version,
        ", and tfm was built for major version ", CUBLAS_VER_MAJOR);
  CublasLt lt;
  resolve(library, file, "cublasLtCreate", lt.create);
  resolve(library, file, "cublasLtGetStatusString", lt.status_string);
  resolve(library, file, "cublasLtMatmulDescCreate", lt.matmul_desc_create);
  resolve(library, file, "cublasLtMatmulDescSetAttribute", lt.matmul_desc_set_attribute);
  resolve(library, file, "cublasLtMatrixLayoutCreate", lt.matrix_layout_create);
  resolve(library, file, "cublasLtMatmulPreferenceCreate", lt.preference_create);
  resolve(library, file, "cublasLtMatmulPreferenceSetAttribute", lt.preference_set_attribute);
  resolve(library, file, "cublasLtMatmulPreferenceDestroy", lt.preference_destroy);
  resolve(library, file, "cublasLtMatmulAlgoGetHeuristic", lt.algo_get_heuristic);
  resolve(library, file, "cublasLtMatmul", lt.matmul);
  return lt;
}

}  // namespace

void CublasLt::check(cublasStatus_t status, const char* call) const {
  if (status != CUBLAS_STATUS_SUCCESS) throw_error("cuBLASLt: ", call, " failed: ", status_string(status));
}

const CublasLt& cublas_lt() {
  static const CublasLt lt = open_cublas_lt();  // a throw leaves it to be tried again by the next call
  return lt;
}

}  // namespace tfm::cuda
