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
// token t is rotated by cos[t] and sin[t]; elements past rot_dim pass through. Runs over (heads * pairs, T).
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
  STORE(rope_element(a, b, LOAD(cos_table, c), LOAD(sin_table, s), true), x, v);
  STORE(rope_element(b, a, LOAD(cos_table, c + pairs), LOAD(sin_table, s + pairs), false), x, v + pairs);
}

// One row of RMSNorm by the RMS_GROUP items of a work-group, the row starting at element x_row of x and
// out_row of out: n = x / sqrt(mean(x^2) + eps) rounded, then out = weight * n. Each item writes only the
// elements it read, so out may be x. (Offsets rather than moved pointers: a half pointer is not for
// arithmetic without cl_khr_fp16.)
// 1 / sqrt(mean(x^2) + eps) of the row of dim elements from element x_row of x, by the RMS_GROUP items of a
// work-group (each gets it).
float inverse_rms(__global const ELEM* x, long x_row, float eps, int dim, __local float* scratch) {
  float sum = 0.0f;
  for (int i = get_local_id(0); i < dim; i += RMS_GROUP) {
    const float v = LOAD(x, x_row + i);
    sum += v * v;
  }
  return 1.0f / sqrt(group_sum(scratch, sum) / (float)dim + eps);
}

void rms_norm_row(__global const ELEM* x, long x_row, __global const ELEM* weight, long weight_off, float eps,
                  __global ELEM* out, long out_row, int dim, __local float* scratch) {
  const int lid = get_local_id(0);
  const float inv = inverse_rms(x, x_row, eps, dim, scratch);
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

// RMSNorm's backward (op::RmsNormBackward) in three launches over the rows of dim elements: rms_norm_inverse
// keeps each row's 1 / rms, rms_norm_dweight sums dweight's columns from it, then rms_norm_dx writes dx, which
// may be dout, so after dweight has read dout.

// inv[r] = 1 / rms of row r; one work-group of RMS_GROUP items per row.
__kernel __attribute__((reqd_work_group_size(RMS_GROUP, 1, 1))) void rms_norm_inverse(
    __global const ELEM* x, long x_off, float eps, __global float* inv, int dim) {
  __local float scratch[RMS_GROUP];
  const float v = inverse_rms(x, x_off + (long)get_group_id(0) * dim, eps, dim, scratch);
  if (get_local_id(0) == 0) inv[get_group_id(0)] = v;
}

// dweight[i] += the sum over rows of dout[r, i] * n[r, i] (n rounded as the forward's product takes it). A
// work-group of NORM_BLOCK x NORM_BLOCK items owns NORM_BLOCK neighbouring columns, each summed over rows by
// NORM_BLOCK lanes, then across the lanes in local memory. Runs over (dim, NORM_BLOCK).
__kernel __attribute__((reqd_work_group_size(NORM_BLOCK, NORM_BLOCK, 1))) void rms_norm_dweight(
    __global const ELEM* x, long x_off, __global const ELEM* dout, long dout_off, __global const float* inv,
    __global float* dweight, long dweight_off, int dim, int rows) {
  __local float sums[NORM_BLOCK][NORM_BLOCK];
  const int column = get_local_id(0), lane = get_local_id(1), i = get_global_id(0);
  float sum = 0.0f;
  if (i < dim)
    for (int r = lane; r < rows; r += NORM_BLOCK) {
      const long e = (long)r * dim + i;
      sum += LOAD(dout, dout_off + e) * ROUND(LOAD(x, x_off + e) * inv[r]);
    }
  sums[lane][column] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = NORM_BLOCK / 2; stride > 0; stride /= 2) {
    if (lane < stride) sums[lane][column] += sums[lane + stride][column];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lane == 0 && i < dim) dweight[dweight_off + i] += sums[0][column];
}

// dx = (dn - n mean(dn n)) * inv with n = x inv and dn = dout weight, or with accumulate dx += that (rounded, then
// the sum, as add_ adds); one work-group of RMS_GROUP items per row. Each item writes only the elements it read,
// so dx may be dout.
__kernel __attribute__((reqd_work_group_size(RMS_GROUP, 1, 1))) void rms_norm_dx(
    __global const ELEM* x, long x_off, __global const ELEM* weight, long weight_off, __global const ELEM* dout,
    long dout_off, __global const float* inv, __global ELEM* dx, long dx_off, int dim, int accumulate) {
  __local float scratch[RMS_GROUP];
  const long row = (long)get_group_id(0) * dim;
  const float r_inv = inv[get_group_id(0)];
  float dot = 0.0f;
  for (int i = get_local_id(0); i < dim; i += RMS_GROUP)
    dot += LOAD(dout, dout_off + row + i) * LOAD(weight, weight_off + i) * (LOAD(x, x_off + row + i) * r_inv);
  const float mean = group_sum(scratch, dot) / (float)dim;
  for (int i = get_local_id(0); i < dim; i += RMS_GROUP) {
    const float n = LOAD(x, x_off + row + i) * r_inv;
    const float dn = LOAD(dout, dout_off + row + i) * LOAD(weight, weight_off + i);
    const float grad = (dn - n * mean) * r_inv;
    STORE(accumulate ? LOAD(dx, dx_off + row + i) + ROUND(grad) : grad, dx, dx_off + row + i);
  }
}

// silu_mul's backward: with s = sigmoid(gate), dgate = dout up s (1 + gate (1 - s)) and dup = dout silu(gate),
// silu rounded as the forward rounds it.
__kernel void silu_mul_backward(__global const ELEM* gate_up, long gate_up_off, __global const ELEM* dout,
                                long dout_off, __global ELEM* dgate_up, long dgate_up_off, int I, int count) {
  const int i = get_global_id(0), t = get_global_id(1);
  if (i >= I || t >= count) return;
  const long g = gate_up_off + (long)t * 2 * I + i, dg = dgate_up_off + (long)t * 2 * I + i;
  const float gate = LOAD(gate_up, g), up = LOAD(gate_up, g + I), d = LOAD(dout, dout_off + (long)t * I + i);
  const float s = 1.0f / (1.0f + exp(-gate));
  STORE(d * up * s * (1.0f + gate * (1.0f - s)), dgate_up, dg);
  STORE(d * ROUND(gate * s), dgate_up, dg + I);
}

// out[t, out_column + c] += scale * x[t, x_column + c] for c < width, the product rounded first, or = it where
// not accumulate (one block of op::AddScaledColumns). Runs over (width, T).
__kernel void add_scaled_columns(__global ELEM* out, long out_off, int out_width, int out_column,
                                 __global const ELEM* x, long x_off, int x_width, int x_column, int width,
                                 float scale, int count, int accumulate) {
  const int c = get_global_id(0), t = get_global_id(1);
  if (c >= width || t >= count) return;
  const long o = out_off + (long)t * out_width + out_column + c;
  const float scaled = ROUND(scale * LOAD(x, x_off + (long)t * x_width + x_column + c));
  STORE(accumulate ? LOAD(out, o) + scaled : scaled, out, o);
}

// Inverted dropout (op::Dropout): element i is kept, times keep_scale (the host's 1 / (1 - p) in float), when
// u = (splitmix64(splitmix64(seed) ^ i) >> 40) / 2^24 is at least p; else zeroed. out may be x.
__kernel void dropout(__global const ELEM* x, long x_off, float p, ulong seed, float keep_scale,
                      __global ELEM* out, long out_off, long n) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const float u = (float)(splitmix64(splitmix64(seed) ^ (ulong)i) >> 40) * 0x1.0p-24f;
  STORE(u >= p ? LOAD(x, x_off + i) * keep_scale : 0.0f, out, out_off + i);
}

// op::QkvRopeCache: one work-group of RMS_GROUP items per (head j of q then k, row t) of qkv (T, (heads +
// 2 kv_heads) dim). The head is made as qkv_head makes it, into q or the key cache at slots[t]; the key heads'
// groups also copy their value head into the value cache. A negative slot (a padding row) writes no key or value.
__kernel __attribute__((reqd_work_group_size(RMS_GROUP, 1, 1))) void qkv_rope_cache(
    __global const ELEM* qkv, long qkv_off, __global const ELEM* q_norm, long q_norm_off,
    __global const ELEM* k_norm, long k_norm_off, float eps, __global const ELEM* cos_table, long cos_off,
    __global const ELEM* sin_table, long sin_off, __global const int* slots, long slots_off, __global ELEM* q,
    long q_off, __global ELEM* cache_k, long cache_k_off, __global ELEM* cache_v, long cache_v_off, int heads,
    int kv_heads, int dim, int rot_dim) {
  __local float scratch[RMS_GROUP];
  __local float raw[MAX_HEAD_DIM], head[MAX_HEAD_DIM];
  const int lid = get_local_id(0), j = get_group_id(0), t = get_group_id(1);
  const bool is_q = j < heads;
  const long row = qkv_off + (long)t * (heads + 2 * kv_heads) * dim;
  const long table = (long)t * rot_dim;
  // Every item reaches the barriers (no branch around them): PoCL's work-group loops need that.
  qkv_head(qkv, row + (long)j * dim, is_q ? q_norm : k_norm, is_q ? q_norm_off : k_norm_off, eps, cos_table,
           cos_off + table, sin_table, sin_off + table, dim, rot_dim, raw, scratch, head);
  const int slot = slots[slots_off + t];
  if (!is_q && slot < 0) return;
  const long kv_row = ((long)slot * kv_heads + (j - heads)) * dim;
  __global ELEM* dest = is_q ? q : cache_k;
  const long out = is_q ? q_off + ((long)t * heads + j) * dim : cache_k_off + kv_row;
  for (int i = lid; i < dim; i += RMS_GROUP) STORE(head[i], dest, out + i);
  if (!is_q) {
    const long value = row + (long)(heads + kv_heads) * dim + (long)(j - heads) * dim;
    for (int i = lid; i < dim; i += RMS_GROUP) STORE(LOAD(qkv, value + i), cache_v, cache_v_off + kv_row + i);
  }
}

// The work-group's choice among its items' candidates (value and column; column -1: none) and flags of whether
// all they saw was finite: into best_value[0], best_index[0] (the larger value, then the smaller column, as
// torch.argmax) and finite[0]. Every item calls it: it holds barriers.
void argmax_group(float value, int index, int all_finite, __local float* best_value, __local int* best_index,
                  __local int* finite) {
  const int lid = get_local_id(0);
  best_value[lid] = value;
  best_index[lid] = index;
  finite[lid] = all_finite;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = ARGMAX_GROUP / 2; stride > 0; stride /= 2) {
    if (lid < stride) {
      const int o = lid + stride;
      const bool better = best_index[o] >= 0 &&
                          (best_index[lid] < 0 || best_value[o] > best_value[lid] ||
                           (best_value[o] == best_value[lid] && best_index[o] < best_index[lid]));
      if (better) {
        best_value[lid] = best_value[o];
        best_index[lid] = best_index[o];
      }
      finite[lid] &= finite[o];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// op::ArgmaxRows: row r of x (R, V) is split into get_num_groups(0) equal parts, a work-group of ARGMAX_GROUP
// items each (one work-group scanning a 151,936-column row waits out a memory latency per element its items
// load). A part's choice (argmax_group) goes to `partial` (value, column, finite flag, as floats) and the last
// part of the row to arrive (counted in `arrivals`, zero between launches) chooses among them; a NaN or an
// infinity anywhere in the row makes its id -1.
__kernel __attribute__((reqd_work_group_size(ARGMAX_GROUP, 1, 1))) void argmax_rows(
    __global const ELEM* x, long x_off, __global int* ids, long ids_off, int V, __global float* partial,
    __global int* arrivals) {
  __local float best_value[ARGMAX_GROUP];
  __local int best_index[ARGMAX_GROUP], finite[ARGMAX_GROUP];
  __local int last;
  const int lid = get_local_id(0), part = get_group_id(0), parts = get_num_groups(0), r = get_group_id(1);
  const int chunk = (V + parts - 1) / parts, begin = min(V, part * chunk), end = min(V, begin + chunk);
  float value = -INFINITY;
  int index = -1, all_finite = 1;
  for (int i = begin + lid; i < end; i += ARGMAX_GROUP) {
    const float v = LOAD(x, x_off + (long)r * V + i);
    all_finite &= isfinite(v);
    if (index < 0 || v > value) {
      value = v;
      index = i;
    }
  }
  argmax_group(value, index, all_finite, best_value, best_index, finite);
  if (parts == 1) {
    if (lid == 0) ids[ids_off + r] = finite[0] ? best_index[0] : -1;
    return;
  }
  __global float* choices = partial + (long)r * parts * 3;
  if (lid == 0) {
    choices[part * 3] = best_value[0];
    choices[part * 3 + 1] = as_float(best_index[0]);
    choices[part * 3 + 2] = as_float(finite[0]);
    mem_fence(CLK_GLOBAL_MEM_FENCE);  // the choice reaches global memory before the part counts as arrived
    last = arrive_last(arrivals + r, parts);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!last) return;
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  __global volatile const float* seen = choices;  // written by other work-groups: not from a cache of this one's
  const bool mine = lid < parts;
  argmax_group(mine ? seen[lid * 3] : -INFINITY, mine ? as_int(seen[lid * 3 + 1]) : -1,
               mine ? as_int(seen[lid * 3 + 2]) : 1, best_value, best_index, finite);
  if (lid == 0) ids[ids_off + r] = finite[0] ? best_index[0] : -1;
}
