// y = x @ w^T + bias for x (M, K) and w (N, K), both row-major (read along K); bias is null or (N). All in
// the dtype DTYPE, accumulated in float; the bias is added before the one rounding of each output. Also
// linear's backward, through the tiled product.

// Tiled: each work-group computes a TILE x TILE block of c = a @ b from TILE_K-deep slices of a and b staged
// in local memory; its (TILE / TILE_REG)^2 items each keep TILE_REG x TILE_REG outputs in registers, strided by
// the item count so that neighbouring items read neighbouring local words. a (rows, inner) and b (inner, cols)
// are read through strides, so that linear's w^T and the backward's transposes need no copy. Runs over (cols,
// rows) rounded up to tiles.
#define TILE_ITEMS (TILE / TILE_REG)

// s[p][o] = element (outer0 + o, p0 + p) of m, at m_off + outer * outer_stride + inner * inner_stride (0 past
// outers x inner), for the TILE x TILE_K slice; the items walk the index that is contiguous in memory first.
void stage_slice(__global const ELEM* m, long m_off, long outer_stride, long inner_stride, int outer0, int outers,
                 int p0, int inner, __local float (*s)[TILE + 1]) {
  const bool along_inner = inner_stride == 1;
  for (int e = get_local_id(1) * TILE_ITEMS + get_local_id(0); e < TILE * TILE_K; e += TILE_ITEMS * TILE_ITEMS) {
    const int o = along_inner ? e / TILE_K : e % TILE, p = along_inner ? e % TILE_K : e / TILE;
    s[p][o] = (outer0 + o < outers && p0 + p < inner)
                  ? LOAD(m, m_off + (outer0 + o) * outer_stride + (p0 + p) * inner_stride)
                  : 0.0f;
  }
}

// The work-group's block of a @ b, this item's outputs left in acc (FOR_TILE_OUTPUTS visits them).
void matmul_tile(__global const ELEM* a, long a_off, long a_row, long a_inner, __global const ELEM* b, long b_off,
                 long b_inner, long b_col, int rows, int inner, int cols, __local float (*as)[TILE + 1],
                 __local float (*bs)[TILE + 1], float acc[TILE_REG][TILE_REG]) {
  const int tx = get_local_id(0), ty = get_local_id(1);
  for (int i = 0; i < TILE_REG; ++i)
    for (int j = 0; j < TILE_REG; ++j) acc[i][j] = 0.0f;
  for (int p0 = 0; p0 < inner; p0 += TILE_K) {
    stage_slice(a, a_off, a_row, a_inner, get_group_id(1) * TILE, rows, p0, inner, as);
    stage_slice(b, b_off, b_col, b_inner, get_group_id(0) * TILE, cols, p0, inner, bs);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int p = 0; p < TILE_K; ++p) {
      float x[TILE_REG], y[TILE_REG];
      for (int i = 0; i < TILE_REG; ++i) x[i] = as[p][ty + i * TILE_ITEMS];
      for (int j = 0; j < TILE_REG; ++j) y[j] = bs[p][tx + j * TILE_ITEMS];
      for (int i = 0; i < TILE_REG; ++i)
        for (int j = 0; j < TILE_REG; ++j) acc[i][j] += x[i] * y[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// Visits the outputs an item of matmul_tile holds, as (row, col) and acc[i][j].
#define FOR_TILE_OUTPUTS(rows, cols, body)                                       \
  for (int i = 0; i < TILE_REG; ++i) {                                           \
    const int row = get_group_id(1) * TILE + get_local_id(1) + i * TILE_ITEMS;   \
    for (int j = 0; j < TILE_REG; ++j) {                                         \
      const int col = get_group_id(0) * TILE + get_local_id(0) + j * TILE_ITEMS; \
      if (row < (rows) && col < (cols)) body                                     \
    }                                                                            \
  }

#define TILED_KERNEL __kernel __attribute__((reqd_work_group_size(TILE_ITEMS, TILE_ITEMS, 1))) void

// y = x @ w^T + bias, the bias added before the one rounding.
TILED_KERNEL linear_tiled(__global const ELEM* x, long x_off, __global const ELEM* w, long w_off,
                          __global const ELEM* bias, long bias_off, __global ELEM* y, long y_off, int M, int K,
                          int N) {
  __local float xs[TILE_K][TILE + 1], ws[TILE_K][TILE + 1];  // k-major, padded against bank conflicts
  float acc[TILE_REG][TILE_REG];
  matmul_tile(x, x_off, K, 1, w, w_off, 1, K, M, K, N, xs, ws, acc);
  FOR_TILE_OUTPUTS(M, N, {
    STORE(acc[i][j] + (bias ? LOAD(bias, bias_off + col) : 0.0f), y, y_off + (long)row * N + col);
  })
}

// linear's backward (op::LinearBackward): dx = dy @ w rounded once, through matmul_store; dw += dy^T @ x into
// its float32 accumulator, through matmul_accumulate; dbias += dy's column sums, through column_sums. And
// linear_add (op::LinearAdd) through matmul_add.
#define MATMUL_ARGS                                                                                    \
  __global const ELEM *a, long a_off, long a_row, long a_inner, __global const ELEM *b, long b_off,      \
      long b_inner, long b_col, int rows, int inner, int cols

// c = a @ b rounded to the dtype.
TILED_KERNEL matmul_store(MATMUL_ARGS, __global ELEM* c, long c_off) {
  __local float as[TILE_K][TILE + 1], bs[TILE_K][TILE + 1];
  float acc[TILE_REG][TILE_REG];
  matmul_tile(a, a_off, a_row, a_inner, b, b_off, b_inner, b_col, rows, inner, cols, as, bs, acc);
  FOR_TILE_OUTPUTS(rows, cols, { STORE(acc[i][j], c, c_off + (long)row * cols + col); })
}

// c += a @ b in c's dtype, the product added in float before the one rounding (op::LinearAdd).
TILED_KERNEL matmul_add(MATMUL_ARGS, __global ELEM* c, long c_off) {
  __local float as[TILE_K][TILE + 1], bs[TILE_K][TILE + 1];
  float acc[TILE_REG][TILE_REG];
  matmul_tile(a, a_off, a_row, a_inner, b, b_off, b_inner, b_col, rows, inner, cols, as, bs, acc);
  FOR_TILE_OUTPUTS(rows, cols, {
    const long at = c_off + (long)row * cols + col;
    STORE(LOAD(c, at) + acc[i][j], c, at);
  })
}

// c += a @ b into a float32 accumulator (each element written by one item).
TILED_KERNEL matmul_accumulate(MATMUL_ARGS, __global float* c, long c_off) {
  __local float as[TILE_K][TILE + 1], bs[TILE_K][TILE + 1];
  float acc[TILE_REG][TILE_REG];
  matmul_tile(a, a_off, a_row, a_inner, b, b_off, b_inner, b_col, rows, inner, cols, as, bs, acc);
  FOR_TILE_OUTPUTS(rows, cols, { c[c_off + (long)row * cols + col] += acc[i][j]; })
}

// dbias[n] += the sum over the M rows of dy[:, n]; one item per column.
__kernel void column_sums(__global const ELEM* dy, long dy_off, int M, int N, __global float* dbias,
                          long dbias_off) {
  const int n = get_global_id(0);
  if (n >= N) return;
  float sum = 0.0f;
  for (int m = 0; m < M; ++m) sum += LOAD(dy, dy_off + (long)m * N + n);
  dbias[dbias_off + n] += sum;
}

// Row m's sum over a column's ROWS_LANES items of acc[m] (each item's share of the column's dot products), for
// lane m of the column (m < ROWS_MAX; other lanes get 0).
float column_sum(float acc[ROWS_MAX], __local float (*partial)[ROWS_GROUP]) {
  const int lid = get_local_id(0), lane = lid % ROWS_LANES;
  for (int m = 0; m < ROWS_MAX; ++m) partial[m][lid] = acc[m];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = ROWS_LANES / 2; stride > 0; stride /= 2) {
    if (lane < stride)
      for (int m = 0; m < ROWS_MAX; ++m) partial[m][lid] += partial[m][lid + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float sum = lane < ROWS_MAX ? partial[lane][lid - lane] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);  // partial may be reused at once
  return sum;
}

// This item's share of the dot products of w's row at w_row with the M rows in local memory (K apart), and of
// w's row at up_row too where `gated` (into acc and up_acc: both rows' loads in flight together): eight
// elements at a time where `vector` (w's rows start on multiples of eight), else one.
void local_row_dots(__global const ELEM* w, long w_row, bool gated, long up_row, bool vector,
                    __local const float* rows, int M, int K, int k_end, int lane, float acc[ROWS_MAX],
                    float up_acc[ROWS_MAX]) {
  for (int m = 0; m < ROWS_MAX; ++m) acc[m] = up_acc[m] = 0.0f;
  const int vector_end = vector ? k_end : 0;
#pragma unroll 4
  for (int k = lane * 8; k < vector_end; k += ROWS_LANES * 8) {
    const float8 wk = LOAD8(w, w_row + k), uk = gated ? LOAD8(w, up_row + k) : 0.0f;
    for (int m = 0; m < ROWS_MAX; ++m) {
      if (m >= M) continue;
      const float8 xk = vload8(0, rows + (long)m * K + k);
      acc[m] += sum8(xk * wk);
      if (gated) up_acc[m] += sum8(xk * uk);
    }
  }
  for (int k = vector_end + lane; k < k_end; k += ROWS_LANES) {
    const float wk = LOAD(w, w_row + k), uk = gated ? LOAD(w, up_row + k) : 0.0f;
    for (int m = 0; m < ROWS_MAX; ++m) {
      if (m >= M) continue;
      acc[m] += rows[(long)m * K + k] * wk;
      if (gated) up_acc[m] += rows[(long)m * K + k] * uk;
    }
  }
}

// This item's share of the dot products of w's row at w_row (and at up_row where `gated`) with the M rows of x
// in global memory (K apart), as local_row_dots; eight elements at a time where `vector` (x's and w's rows
// start on multiples of eight).
void global_row_dots(__global const ELEM* x, long x_off, __global const ELEM* w, long w_row, bool gated,
                     long up_row, bool vector, int M, int K, int k_end, int lane, float acc[ROWS_MAX],
                     float up_acc[ROWS_MAX]) {
  for (int m = 0; m < ROWS_MAX; ++m) acc[m] = up_acc[m] = 0.0f;
  const int vector_end = vector ? k_end : 0;
  // Unrolled so that each item has several loads in flight.
#pragma unroll 4
  for (int k = lane * 8; k < vector_end; k += ROWS_LANES * 8) {
    const float8 wk = LOAD8(w, w_row + k), uk = gated ? LOAD8(w, up_row + k) : 0.0f;
    for (int m = 0; m < ROWS_MAX; ++m) {
      if (m >= M) continue;
      const float8 xk = LOAD8(x, x_off + (long)m * K + k);
      acc[m] += sum8(xk * wk);
      if (gated) up_acc[m] += sum8(xk * uk);
    }
  }
  for (int k = vector_end + lane; k < k_end; k += ROWS_LANES) {
    const float wk = LOAD(w, w_row + k), uk = gated ? LOAD(w, up_row + k) : 0.0f;
    for (int m = 0; m < ROWS_MAX; ++m) {
      if (m >= M) continue;
      const float xk = LOAD(x, x_off + (long)m * K + k);
      acc[m] += xk * wk;
      if (gated) up_acc[m] += xk * uk;
    }
  }
}

// silu(gate) * up from a gate column's and its up column's float sums, rounded as linear and silu_mul round.
float silu_gate(float gate_sum, float up_sum) {
  const float gate = ROUND(gate_sum);
  return ROUND(gate / (1.0f + exp(-gate))) * ROUND(up_sum);
}

// A few rows of x (M <= ROWS_MAX, a decode step): tiles would mostly hold padding, and the time goes into
// reading w once. A work-group of ROWS_GROUP items computes ROWS_GROUP / ROWS_LANES columns: ROWS_LANES items
// stream each column's row of w eight elements (16 bytes in the 2-byte dtypes) at a time, neighbouring items
// reading neighbouring bytes, then sum their partial dot products in local memory. Gated (norm_linear without
// its norm), the items take the gate's row n and the up's row n + N / 2 of w and write silu(gate) * up. Runs
// over (ceil(columns / (ROWS_GROUP / ROWS_LANES)) * ROWS_GROUP).
__kernel __attribute__((reqd_work_group_size(ROWS_GROUP, 1, 1))) void linear_rows(
    __global const ELEM* x, long x_off, __global const ELEM* w, long w_off, __global const ELEM* bias,
    long bias_off, __global ELEM* y, long y_off, int M, int K, int N, int gated) {
  __local float partial[ROWS_MAX][ROWS_GROUP];
  const int lid = get_local_id(0), lane = lid % ROWS_LANES;
  const int columns = gated ? N / 2 : N;
  const int n = get_group_id(0) * (ROWS_GROUP / ROWS_LANES) + lid / ROWS_LANES;
  // Items past the last column skip the loops but not the barriers. Eight elements at a time needs every row
  // of x and w to start on a multiple of eight; else one at a time.
  const int k_end = n < columns ? K : 0;
  const bool vector = ((x_off | w_off | K) & 7) == 0;
  float acc[ROWS_MAX], up_acc[ROWS_MAX];
  global_row_dots(x, x_off, w, w_off + (long)n * K, gated, w_off + (long)(n + columns) * K, vector, M, K, k_end,
                  lane, acc, up_acc);
  float value = column_sum(acc, partial) + (bias && n < columns ? LOAD(bias, bias_off + n) : 0.0f);
  if (gated) {
    value = silu_gate(value, column_sum(up_acc, partial) +
                                 (bias && n < columns ? LOAD(bias, bias_off + n + columns) : 0.0f));
  }
  if (n < columns && lane < M) STORE(value, y, y_off + (long)lane * columns + n);
}

// op::NormLinear for a few rows: linear_rows whose work-group first makes its input rows itself, in local
// memory, from the residual stream (residual + pending rounded, which work-group 0 also writes to residual_out;
// then RMSNorm rounded as add_rms_norm rounds), and which, when gated, takes the gate's row n and the up's row
// n + N / 2 of w and writes silu(gate) * up. A decode layer's two norms and SiLU gate then cost no launches of
// their own (a launch is ~8 us of host time on NVIDIA's OpenCL). M * K <= NORM_ROWS.
__kernel __attribute__((reqd_work_group_size(ROWS_GROUP, 1, 1))) void norm_linear_rows(
    __global const ELEM* residual, long residual_off, __global const ELEM* pending, long pending_off,
    __global const ELEM* norm_w, long norm_w_off, float eps, __global const ELEM* w, long w_off,
    __global const ELEM* bias, long bias_off, __global ELEM* residual_out, long residual_out_off,
    __global ELEM* y, long y_off, int M, int K, int N, int gated) {
  __local float rows[NORM_ROWS];
  __local float partial[ROWS_MAX][ROWS_GROUP];
  const int lid = get_local_id(0), lane = lid % ROWS_LANES;
  const bool writes_residual = pending && get_group_id(0) == 0;
  // The norm's weights load with the first row, not behind its sum's barriers.
  float norm_weights[NORM_ROWS / ROWS_GROUP];
  for (int j = 0; j < NORM_ROWS / ROWS_GROUP; ++j) {
    const int i = lid + j * ROWS_GROUP;
    norm_weights[j] = i < K ? LOAD(norm_w, norm_w_off + i) : 0.0f;
  }
  for (int m = 0; m < M; ++m) {
    const long row = (long)m * K;
    float sum = 0.0f;
    for (int i = lid; i < K; i += ROWS_GROUP) {
      float v = LOAD(residual, residual_off + row + i);
      if (pending) {
        v = ROUND(v + LOAD(pending, pending_off + row + i));
        if (writes_residual) STORE(v, residual_out, residual_out_off + row + i);
      }
      rows[row + i] = v;
      sum += v * v;
    }
    const float inv = 1.0f / sqrt(group_sum(partial[0], sum) / (float)K + eps);
    for (int j = 0; j < NORM_ROWS / ROWS_GROUP; ++j) {
      const int i = lid + j * ROWS_GROUP;
      if (i < K) rows[row + i] = ROUND(norm_weights[j] * ROUND(rows[row + i] * inv));
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int columns = gated ? N / 2 : N;
  const int n = get_group_id(0) * (ROWS_GROUP / ROWS_LANES) + lid / ROWS_LANES;
  const int k_end = n < columns ? K : 0;
  const bool vector = ((w_off | K) & 7) == 0;
  float acc[ROWS_MAX], up_acc[ROWS_MAX];
  local_row_dots(w, w_off + (long)n * K, gated, w_off + (long)(n + columns) * K, vector, rows, M, K, k_end, lane,
                 acc, up_acc);
  float value = column_sum(acc, partial) + (bias && n < columns ? LOAD(bias, bias_off + n) : 0.0f);
  if (gated) {
    value = silu_gate(value, column_sum(up_acc, partial) +
                                 (bias && n < columns ? LOAD(bias, bias_off + n + columns) : 0.0f));
  }
  if (n < columns && lane < M) STORE(value, y, y_off + (long)lane * columns + n);
}
