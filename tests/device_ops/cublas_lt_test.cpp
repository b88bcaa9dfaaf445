// cuBLASLt, which the CUDA matmul opens by name on first use: it opens, at the major version of the headers,
// with every function tfm calls. No GPU is needed, only the library (the CUDA toolkit's, or the nvidia-cublas
// Python package's on LD_LIBRARY_PATH); where it is absent the test skips.
#ifdef TFM_HAVE_CUDA
#include <gtest/gtest.h>

#include <string>

#include "tfm/backend/cuda/cublas_lt.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

TEST(CublasLt, OpensWithEveryFunctionTfmCalls) {
  const cuda::CublasLt* lt = nullptr;
  try {
    lt = &cuda::cublas_lt();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  for (const void* f :
       {reinterpret_cast<const void*>(lt->create), reinterpret_cast<const void*>(lt->status_string),
        reinterpret_cast<const void*>(lt->matmul_desc_create),
        reinterpret_cast<const void*>(lt->matmul_desc_set_attribute),
        reinterpret_cast<const void*>(lt->matrix_layout_create),
        reinterpret_cast<const void*>(lt->preference_create),
        reinterpret_cast<const void*>(lt->preference_set_attribute),
        reinterpret_cast<const void*>(lt->preference_destroy),
        reinterpret_cast<const void*>(lt->algo_get_heuristic), reinterpret_cast<const void*>(lt->matmul)}) {
    EXPECT_NE(f, nullptr);
  }
  EXPECT_NE(std::string(lt->status_string(CUBLAS_STATUS_NOT_INITIALIZED)).find("not initialized"),
            std::string::npos);
}

}  // namespace
}  // namespace tfm
#endif
