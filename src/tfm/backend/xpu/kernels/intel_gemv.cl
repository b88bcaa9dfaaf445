// y = x @ w^T + bias for a few rows of x (M <= ROWS_MAX, a decode step) on Intel GPUs: as linear_rows
// (linear.cl), but each output column belongs to one sub-group of SUB_GROUP lanes, which reads w[n] with block
// reads (one element per lane, SUB_GROUP consecutive elements per read) and sums with sub_group_reduce_add
// instead of local memory and barriers. A work-group holds SG_COLUMNS sub-groups, one column each.
//
// The host launches it only where the block reads are valid: rows of w start 16-byte aligned (w's offset and
// K * element size are multiples of 16). Built only for devices with these extensions (intel_linear.cpp).
#if !defined(cl_intel_subgroups) || !defined(cl_intel_subgroups_short) || \
    !defined(cl_intel_required_subgroup_size)
#error "intel_gemv.cl needs cl_intel_subgroups, cl_intel_subgroups_short and cl_intel_required_subgroup_size"
#endif

__kernel __attribute__((reqd_work_group_size(SUB_GROUP * SG_COLUMNS, 1, 1)))
__attribute__((intel_reqd_sub_group_size(SUB_GROUP))) void linear_subgroup_rows(
    __global const ELEM* x, long x_off, __global const ELEM* w, long w_off, __global const ELEM* bias,
    long bias_off, __global ELEM* y, long y_off, int M, int K, int N) {
  const int lane = get_sub_group_local_id();
  const int n = get_group_id(0) * SG_COLUMNS + get_sub_group_id();
  if (n >= N) return;  // the same for every lane of the sub-group
  const __global ELEM* wn = w + w_off + (long)n * K;

  float acc[ROWS_MAX];
  for (int m = 0; m < ROWS_MAX; ++m) acc[m] = 0.0f;
  int k0 = 0;
  for (; k0 + SUB_GROUP <= K; k0 += SUB_GROUP) {  // whole blocks: lane reads w[n][k0 + lane]
    const float wk = BLOCK_LOAD(wn, k0);
    for (int m = 0; m < ROWS_MAX; ++m)
      if (m < M) acc[m] += LOAD(x, x_off + (long)m * K + k0 + lane) * wk;
  }
  if (k0 + lane < K) {  // the last K % SUB_GROUP elements, one per lane
    const float wk = LOAD(w, w_off + (long)n * K + k0 + lane);
    for (int m = 0; m < ROWS_MAX; ++m)
      if (m < M) acc[m] += LOAD(x, x_off + (long)m * K + k0 + lane) * wk;
  }

  const float b = bias ? LOAD(bias, bias_off + n) : 0.0f;
  for (int m = 0; m < ROWS_MAX; ++m) {
    const float total = sub_group_reduce_add(acc[m]);  // every lane calls it: no divergence before
    if (lane == 0 && m < M) STORE(total + b, y, y_off + (long)m * N + n);
  }
}
