// Sizes that files and users give: products past int64 and allocations past memory are tfm::Errors naming
// them, not wrapped-around sizes or std::bad_alloc.
#include <gtest/gtest.h>

#include <limits>

#include "support/error_of.h"
#include "tfm/core/error.h"
#include "tfm/core/tensor.h"

namespace tfm {
namespace {

using test_support::error_of;

TEST(Sizes, ProductsPastInt64AreErrors) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "x"), int64_t{1} << 62);
  EXPECT_EQ(error_of([] { checked_mul(int64_t{1} << 32, int64_t{1} << 32, "the rows"); }),
            "the rows (4294967296 * 4294967296) does not fit in 64 bits");
  EXPECT_EQ(error_of([] {
              shape_numel({int64_t{1} << 40, int64_t{1} << 40});
            }),
            "the elements of shape [1099511627776, 1099511627776] (1099511627776 * 1099511627776) does not "
            "fit in 64 "
            "bits");
  EXPECT_EQ(error_of([] { shape_bytes({int64_t{1} << 62}, DType::float32); }),
            "the bytes of shape [4611686018427387904] (4611686018427387904 * 4) does not fit in 64 bits");
  EXPECT_EQ(error_of([] { shape_numel({4, -1}); }), "shape [4, -1] has a negative size");
}

// Linux grants a block larger than the machine's memory and kills the process once it is touched; the check
// against MemAvailable makes that an error first.
TEST(Sizes, AHostTensorPastMemoryIsAnErrorNamingIt) {
  const std::string error = error_of([] { Tensor::cpu({int64_t{1} << 40}, DType::float32); });
  EXPECT_EQ(
      error.rfind("out of memory: a float32[1099511627776] tensor needs 4398046511104 bytes of host memory, "
                  "and ",
                  0),
      0u)
      << error;
}

}  // namespace
}  // namespace tfm
