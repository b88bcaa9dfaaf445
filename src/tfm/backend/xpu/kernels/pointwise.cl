// Row copies, pointwise ops and RMSNorm (op_kernels.h gives the semantics; cpu/kernels.cpp is the reference).
// Two-dimensional kernels run over (column, row).

// out[i, :] = x[rows[i], :]; also the embedding lookup (x the table, rows the token ids).
__kernel void gather_rows(__global const float* x, long x_off, __global const int* rows, long rows_off,
                          __global float* out, long out_off, int width, int count) {
  const int c = get_global_id(0), i = get_global_id(1);
  if (c >= width || i >= count) return;
  const long row = rows[rows_off + i];
  out[out_off + (long)i * width + c] = x[x_off + row * width + c];
}

// cache_k[slots[t], :] = k[t, :] and cache_v[slots[t], :] = v[t, :], rows of kv_dim floats.
__kernel void kv_cache_write(__global const float* k, long k_off, __global const float* v, long v_off,
                             __global const int* slots, long slots_off, __global float* cache_k,
                             long cache_k_off, __global float* cache_v, long cache_v_off, int kv_dim,
                             int count) {
  const int c = get_global_id(0), t = get_global_id(1);
  if (c >= kv_dim || t >= count) return;
  const long slot = slots[slots_off + t];
  cache_k[cache_k_off + slot * kv_dim + c] = k[k_off + (long)t * kv_dim + c];
  cache_v[cache_v_off + slot * kv_dim + c] = v[v_off + (long)t * kv_dim + c];
}

// out[t, :] = x[t, first : first + width] for x of x_width columns.
__kernel void copy_columns(__global const float* x, long x_off, int x_width, int first, __global float* out,
                           long out_off, int width, int count) {
  const int c = get_global_id(0), t = get_global_id(1);
  if (c >= width || t >= count) return;
  out[out_off + (long)t * width + c] = x[x_off + (long)t * x_width + first + c];
}

// x += y over n elements.
__kernel void add_inplace(__global float* x, long x_off, __global const float* y, long y_off, long n) {
  const long i = get_global_id(0);
  if (i < n) x[x_off + i] += y[y_off + i];
}

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, I + i].
__kernel void silu_mul(__global const float* gate_up, long gate_up_off, __global float* out, long out_off,
                       int I, int count) {
  const int i = get_global_id(0), t = get_global_id(1);
  if (i >= I || t >= count) return;
  const __global float* g = gate_up + gate_up_off + (long)t * 2 * I;
  const float gate = g[i];
  out[out_off + (long)t * I + i] = gate / (1.0f + exp(-gate)) * g[I + i];
}

// Half-split rotary embedding of x (T, heads, head_dim) in place: pair (p, p + rot_dim / 2) of every head of
// token t is rotated by cos[t] and sin[t]; elements past rot_dim pass through. Runs over (heads * pairs, T).
__kernel void rope(__global float* x, long x_off, __global const float* cos_table, long cos_off,
                   __global const float* sin_table, long sin_off, int heads, int head_dim, int rot_dim,
                   int count) {
  const int pairs = rot_dim / 2;
  const int i = get_global_id(0), t = get_global_id(1);
  if (i >= heads * pairs || t >= count) return;
  const int h = i / pairs, p = i % pairs;
  __global float* v = x + x_off + ((long)t * heads + h) * head_dim;
  const __global float* c = cos_table + cos_off + (long)t * rot_dim;
  const __global float* s = sin_table + sin_off + (long)t * rot_dim;
  const float a = v[p], b = v[p + pairs];
  v[p] = a * c[p] - b * s[p];
  v[p + pairs] = b * c[p + pairs] + a * s[p + pairs];
}

// out[r] = weight * (x[r] / sqrt(mean(x[r]^2) + eps)); one work-group of RMS_GROUP items per row. out may be
// x: each item rewrites only the elements it read.
__kernel __attribute__((reqd_work_group_size(RMS_GROUP, 1, 1))) void rms_norm(
    __global const float* x, long x_off, __global const float* weight, long weight_off, float eps,
    __global float* out, long out_off, int dim) {
  __local float scratch[RMS_GROUP];
  const int lid = get_local_id(0);
  const long base = (long)get_group_id(0) * dim;
  const __global float* xr = x + x_off + base;
  float sum = 0.0f;
  for (int i = lid; i < dim; i += RMS_GROUP) sum += xr[i] * xr[i];
  const float inv = 1.0f / sqrt(group_sum(scratch, sum) / (float)dim + eps);
  __global float* o = out + out_off + base;
  for (int i = lid; i < dim; i += RMS_GROUP) o[i] = weight[weight_off + i] * (xr[i] * inv);
}
