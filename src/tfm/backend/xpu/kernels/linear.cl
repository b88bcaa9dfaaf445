// y = x @ w^T + bias for x (M, K) and w (N, K), both row-major (read along K); bias is null or (N). All in
// the dtype DTYPE, accumulated in float; the bias is added before the one rounding of each output.

// Tiled: each work-group computes a TILE x TILE block of y from TILE_K-wide slices of x and w staged in local
// memory; its (TILE / TILE_REG)^2 items each keep TILE_REG x TILE_REG outputs in registers, strided by the
// item count so that neighbouring items read neighbouring local words. Runs over (N, M) rounded up to tiles.
#define TILE_ITEMS (TILE / TILE_REG)

__kernel __attribute__((reqd_work_group_size(TILE_ITEMS, TILE_ITEMS, 1))) void linear_tiled(
    __global const ELEM* x, long x_off, __global const ELEM* w, long w_off, __global const ELEM* bias,
    long bias_off, __global ELEM* y, long y_off, int M, int K, int N) {
  __local float xs[TILE_K][TILE + 1];  // k-major, padded against bank conflicts
  __local float ws[TILE_K][TILE + 1];
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int item = ty * TILE_ITEMS + tx;
  const int n0 = get_group_id(0) * TILE, m0 = get_group_id(1) * TILE;
  float acc[TILE_REG][TILE_REG];
  for (int i = 0; i < TILE_REG; ++i)
    for (int j = 0; j < TILE_REG; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    for (int e = item; e < TILE * TILE_K; e += TILE_ITEMS * TILE_ITEMS) {
      const int r = e / TILE_K, k = k0 + e % TILE_K;
      xs[e % TILE_K][r] = (m0 + r < M && k < K) ? LOAD(x, x_off + (long)(m0 + r) * K + k) : 0.0f;
      ws[e % TILE_K][r] = (n0 + r < N && k < K) ? LOAD(w, w_off + (long)(n0 + r) * K + k) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE_K; ++k) {
      float a[TILE_REG], b[TILE_REG];
      for (int i = 0; i < TILE_REG; ++i) a[i] = xs[k][ty + i * TILE_ITEMS];
      for (int j = 0; j < TILE_REG; ++j) b[j] = ws[k][tx + j * TILE_ITEMS];
      for (int i = 0; i < TILE_REG; ++i)
        for (int j = 0; j < TILE_REG; ++j) acc[i][j] += a[i] * b[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  for (int i = 0; i < TILE_REG; ++i) {
    const int m = m0 + ty + i * TILE_ITEMS;
    for (int j = 0; j < TILE_REG; ++j) {
      const int n = n0 + tx + j * TILE_ITEMS;
      if (m < M && n < N)
        STORE(acc[i][j] + (bias ? LOAD(bias, bias_off + n) : 0.0f), y, y_off + (long)m * N + n);
    }
  }
}

// A few rows of x (M <= ROWS_MAX, a decode step): tiles would mostly hold padding, and the time goes into
// reading w once. A work-group of ROWS_GROUP items computes ROWS_GROUP / ROWS_LANES columns: ROWS_LANES items
// stream each column's row of w eight elements (16 bytes in the 2-byte dtypes) at a time, neighbouring items
// reading neighbouring bytes, then sum their partial dot products in local memory. Runs over
// (ceil(N / (ROWS_GROUP / ROWS_LANES)) * ROWS_GROUP).
__kernel __attribute__((reqd_work_group_size(ROWS_GROUP, 1, 1))) void linear_rows(
    __global const ELEM* x, long x_off, __global const ELEM* w, long w_off, __global const ELEM* bias,
    long bias_off, __global ELEM* y, long y_off, int M, int K, int N) {
  __local float partial[ROWS_MAX][ROWS_GROUP];
  const int lid = get_local_id(0), lane = lid % ROWS_LANES;
  const int n = get_group_id(0) * (ROWS_GROUP / ROWS_LANES) + lid / ROWS_LANES;
  const long w_row = w_off + (long)n * K;
  float acc[ROWS_MAX];
  for (int m = 0; m < ROWS_MAX; ++m) acc[m] = 0.0f;
  // Items past the last column skip the loops but not the barriers. Eight elements at a time needs every row
  // of x and w to start on a multiple of eight; else one at a time.
  const int k_end = n < N ? K : 0;
  const int vector_end = ((x_off | w_off | K) & 7) == 0 ? k_end : 0;
  // Unrolled so that each item has several loads in flight.
#pragma unroll 4
  for (int k = lane * 8; k < vector_end; k += ROWS_LANES * 8) {
    const float8 wk = LOAD8(w, w_row + k);
    for (int m = 0; m < ROWS_MAX; ++m)
      if (m < M) acc[m] += sum8(LOAD8(x, x_off + (long)m * K + k) * wk);
  }
  for (int k = vector_end + lane; k < k_end; k += ROWS_LANES) {
    const float wk = LOAD(w, w_row + k);
    for (int m = 0; m < ROWS_MAX; ++m)
      if (m < M) acc[m] += LOAD(x, x_off + (long)m * K + k) * wk;
  }
  for (int m = 0; m < ROWS_MAX; ++m) partial[m][lid] = acc[m];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = ROWS_LANES / 2; stride > 0; stride /= 2) {
    if (lane < stride)
      for (int m = 0; m < ROWS_MAX; ++m) partial[m][lid] += partial[m][lid + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  // Lane m of a column writes y[m, n].
  if (n < N && lane < M)
    STORE(partial[lane][lid - lane] + (bias ? LOAD(bias, bias_off + n) : 0.0f), y, y_off + (long)lane * N + n);
}
