// cuBLASLt, opened when the first matmul needs it rather than linked: its mappings are ~150 MB of a process's
// memory, which `tfm --help` and CPU runs should not pay for. The functions tfm calls are resolved into
// pointers typed by cublasLt.h's own prototypes, so a call that does not match the header does not compile.
#pragma once

#include <cublasLt.h>

namespace tfm::cuda {

struct CublasLt {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtGetStatusString) status_string;
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&cublasLtMatrixLayoutCreate) matrix_layout_create;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;
  decltype(&cublasLtMatmul) matmul;

  // Throws tfm::Error naming `call` and cuBLASLt's reason unless `status` is success.
  void check(cublasStatus_t status, const char* call) const;
};

// The library, opened on the first call: libcublasLt.so.<major of the headers>, else libcublasLt.so of that
// major. A library that cannot be opened, or lacks a function, is a tfm::Error naming it with dlerror()'s
// reason.
const CublasLt& cublas_lt();

}  // namespace tfm::cuda
