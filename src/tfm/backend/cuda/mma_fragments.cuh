// Tensor-core products as the PTX ISA states them (mma.sync.m16n8k16 with float32 accumulation, operands loaded
// from shared memory by ldmatrix), for kernels that keep operands and results in registers across products.
// Lane l of a warp holds, with g = l / 4 and c = 2 (l % 4) (PTX ISA, "Matrix fragments for mma.m16n8k16"):
//   A (16 x 16, row-major): registers (g, c..c+1), (g + 8, c..c+1), (g, c+8..c+9), (g + 8, c+8..c+9)
//   B (16 x 8, k x n):      registers (k c..c+1, n g), (k c+8..c+9, n g)
//   C (16 x 8, float):      (g, c), (g, c + 1), (g + 8, c), (g + 8, c + 1)
// Each 32-bit register holds two 16-bit elements, the lower column (or k) in its low half. So two C fragments
// side by side (16 x 16, rounded to 16 bits) are an A fragment: products stay in registers from one mma to the
// next, as flash attention chains q k^T into p v.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tfm::cuda {

struct FragA {
  uint32_t x[4];
};
struct FragB {
  uint32_t x[2];
};
struct FragC {
  float x[4];
};

__device__ inline int fragment_group() {
  return static_cast<int>(threadIdx.x % 32) / 4;
}
__device__ inline int fragment_pair() {
  return 2 * static_cast<int>(threadIdx.x % 4);
}

// Two floats rounded to T (__nv_bfloat16 or __half) in one register, `lo` in the low half.
template <typename T>
__device__ inline uint32_t pack(float lo, float hi) {
  uint32_t bits;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&bits, &v, 4);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&bits, &v, 4);
  }
  return bits;
}

// The A fragment of 16 x 16 elements whose left and right halves are the C fragments `left` and `right`.
template <typename T>
__device__ inline FragA as_operand(const FragC& left, const FragC& right) {
  return {{pack<T>(left.x[0], left.x[1]), pack<T>(left.x[2], left.x[3]), pack<T>(right.x[0], right.x[1]),
           pack<T>(right.x[2], right.x[3])}};
}

// d += a b.
template <typename T>
__device__ inline void mma(FragC& d, const FragA& a, const FragB& b) {
#if __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
        : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
        : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
  }
#endif
}

// Four 8 x 8 matrices of 16-bit elements from shared memory: lanes 8i .. 8i + 7 give the addresses of matrix i's
// rows (16 bytes each), and register i of lane l receives matrix i's elements (l / 4, c..c+1). With `Transposed`
// it receives (c..c+1, l / 4) instead: two rows' elements of one column.
template <bool Transposed>
__device__ inline void load_matrices(uint32_t (&r)[4], const void* row) {
#if __CUDA_ARCH__ >= 800
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (Transposed) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  }
#endif
}

// The A fragment of the 16 x 16 block at `tile` (row-major, rows ld elements apart).
template <typename T>
__device__ inline FragA load_a(const T* tile, int ld) {
  const int l = static_cast<int>(threadIdx.x % 32);
  FragA a;
  load_matrices<false>(a.x, tile + (l % 16) * ld + (l / 16) * 8);
  return a;
}

// The transpose of the 8 x 8 matrix of 16-bit elements that one register of each lane holds as ldmatrix
// leaves it (lane l: row l / 4, columns c..c+1), in the same layout.
__device__ inline uint32_t transposed(uint32_t x) {
  uint32_t t = 0;
#if __CUDA_ARCH__ >= 800
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(t) : "r"(x));
#endif
  return t;
}

// The A fragment of the transpose of the 16 x 16 block whose A fragment is `a`: each 8 x 8 quarter
// transposed, the off-diagonal two swapped.
__device__ inline FragA transposed(const FragA& a) {
  return {{transposed(a.x[0]), transposed(a.x[2]), transposed(a.x[1]), transposed(a.x[3])}};
}

// B fragments of two neighbouring 8-column blocks, from 16 x 16 elements of a tile. `rows_are_n`: the tile's
// rows are B's columns (keys stored as rows, multiplied as q k^T: B = the tile transposed); else its rows are
// B's k (values stored as rows, multiplied as p v). `tile` is the block's first element, rows ld apart.
template <bool RowsAreN, typename T>
__device__ inline void load_b_pair(FragB& first, FragB& second, const T* tile, int ld) {
  const int l = static_cast<int>(threadIdx.x % 32);
  uint32_t r[4];
  if constexpr (RowsAreN) {
    // matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
    load_matrices<false>(r, tile + ((l % 8) + (l / 16) * 8) * ld + ((l / 8) % 2) * 8);
  } else {
    // matrices, read transposed: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
    load_matrices<true>(r, tile + ((l % 8) + ((l / 8) % 2) * 8) * ld + (l / 16) * 8);
  }
  first = {{r[0], r[1]}};
  second = {{r[2], r[3]}};
}

}  // namespace tfm::cuda
