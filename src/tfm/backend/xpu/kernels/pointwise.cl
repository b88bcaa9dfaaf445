// Pointwise ops and RMSNorm in the dtype DTYPE (op_set.h gives the semantics and where they round;
// cpu/kernels.cpp is the reference). Two-dimensional kernels run over (column, row).

// x += y over n elements.
__kernel void add_inplace(__global ELEM* x, long x_off, __global const ELEM* y, long y_off, long n) {
  const long i = get_global_id(0);
  if (i < n) STORE(LOAD(x, x_off + i) + LOAD(y, y_off + i), x, x_off + i);
}

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, I + i], silu's result rounded first.
__kernel void silu_mul(__global const ELEM* gate_up, long gate_up_off, __global ELEM* out, long out_off,
                       int I, int count) {
  const int i = get_global_id(0), t = get_global_id(1);
  if (i >= I || t >= count) return;
  const long g = gate_up_off + (long)t * 2 * I + i;
  const float gate = LOAD(gate_up, g);
  STORE(ROUND(gate / (1.0f + exp(-gate))) * LOAD(gate_up, g + I), out, out_off + (long)t * I + i);
}

// Half-split rotary embedding of x (T, heads, head_dim) in place: pair (p, p + rot_dim / 2) of every head of
// token t is rotated by cos[t] and sin[t], each product and the sum rounded; elements past rot_dim pass
// through. Runs over (heads * pairs, T).
__kernel void rope(__global ELEM* x, long x_off, __global const ELEM* cos_table, long cos_off,
                   __global const ELEM* sin_table, long sin_off, int heads, int head_dim, int rot_dim,
                   int count) {
  const int pairs = rot_dim / 2;
  const int i = get_global_id(0), t = get_global_id(1);
  if (i >= heads * pairs || t >= count) return;
  const int h = i / pairs, p = i % pairs;
  const long v = x_off + ((long)t * heads + h) * head_dim + p;
  const long c = cos_off + (long)t * rot_dim + p, s = sin_off + (long)t * rot_dim + p;
  const float a = LOAD(x, v), b = LOAD(x, v + pairs);
  STORE(ROUND(a * LOAD(cos_table, c)) + ROUND(-b * LOAD(sin_table, s)), x, v);
  STORE(ROUND(b * LOAD(cos_table, c + pairs)) + ROUND(a * LOAD(sin_table, s + pairs)), x, v + pairs);
}

// One row of RMSNorm by the RMS_GROUP items of a work-group, the row starting at element x_row of x and
// out_row of out: n = x / sqrt(mean(x^2) + eps) rounded, then out = weight * n. Each item writes only the
// elements it read, so out may be x. (Offsets rather than moved pointers: a half pointer is not for
// arithmetic without cl_khr_fp16.)
void rms_norm_row(__global const ELEM* x, long x_row, __global const ELEM* weight, long weight_off, float eps,
                  __global ELEM* out, long out_row, int dim, __local float* scratch) {
  const int lid = get_local_id(0);
  float sum = 0.0f;
  for (int i = lid; i < dim; i += RMS_GROUP) {
    const float v = LOAD(x, x_row + i);
    sum += v * v;
  }
  const float inv = 1.0f / sqrt(group_sum(scratch, sum) / (float)dim + eps);
  for (int i = lid; i < dim; i += RMS_GROUP)
    STORE(LOAD(weight, weight_off + i) * ROUND(LOAD(x, x_row + i) * inv), out, out_row + i);
}

// One work-group of RMS_GROUP items per row.
__kernel __attribute__((reqd_work_group_size(RMS_GROUP, 1, 1))) void rms_norm(
    __global const ELEM* x, long x_off, __global const ELEM* weight, long weight_off, float eps,
    __global ELEM* out, long out_off, int dim) {
  __local float scratch[RMS_GROUP];
  const long row = (long)get_group_id(0) * dim;
  rms_norm_row(x, x_off + row, weight, weight_off, eps, out, out_off + row, dim, scratch);
}

// residual += x (rounded), then out = rms_norm(residual), in one pass over each row. The norm reads back what
// the same item wrote, so no barrier is needed between the two.
__kernel __attribute__((reqd_work_group_size(RMS_GROUP, 1, 1))) void add_rms_norm(
    __global ELEM* residual, long residual_off, __global const ELEM* x, long x_off,
    __global const ELEM* weight, long weight_off, float eps, __global ELEM* out, long out_off, int dim) {
  __local float scratch[RMS_GROUP];
  const long row = (long)get_group_id(0) * dim, h = residual_off + row;
  for (int i = get_local_id(0); i < dim; i += RMS_GROUP)
    STORE(LOAD(residual, h + i) + LOAD(x, x_off + row + i), residual, h + i);
  rms_norm_row(residual, h, weight, weight_off, eps, out, out_off + row, dim, scratch);
}
