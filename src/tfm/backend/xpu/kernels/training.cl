// Training kernels in the dtype DTYPE: embedding's backward, the cross-entropy loss, sum_squares and the AdamW
// step (op_set.h gives what each computes and where it rounds; cpu/training.cpp is the reference). Linear's
// backward is in linear.cl, RMSNorm's and SiLU-gate's in pointwise.cl. Parameter gradients are float32
// accumulators the kernels add to; OpenCL C 1.2 has no float atomics, so every accumulator element has exactly
// one writer, and sums over work-groups go through partial sums and sum_into.

// ---- embedding_backward ----

// dtable[ids[t], h] += dout[t, h]: one item per column h walking the rows in order, so that a repeated id adds
// to its row from one item. An id outside the table's V rows (which the CPU reports) adds nothing.
__kernel void embedding_backward(__global const int* ids, long ids_off, __global const ELEM* dout, long dout_off,
                                 __global float* dtable, long dtable_off, int H, int count, int V) {
  const int h = get_global_id(0);
  if (h >= H) return;
  for (int t = 0; t < count; ++t) {
    const int id = ids[ids_off + t];
    if (id >= 0 && id < V) dtable[dtable_off + (long)id * H + h] += LOAD(dout, dout_off + (long)t * H + h);
  }
}

// ---- sums over work-groups ----

// out[0] = the sum of parts[0..count), added to out[0]'s value when `accumulate`; one work-group.
__kernel __attribute__((reqd_work_group_size(REDUCE_GROUP, 1, 1))) void sum_into(
    __global const float* parts, int count, __global float* out, long out_off, int accumulate) {
  __local float scratch[REDUCE_GROUP];
  float sum = 0.0f;
  for (int i = get_local_id(0); i < count; i += REDUCE_GROUP) sum += parts[i];
  const float total = group_sum(scratch, sum);
  if (get_local_id(0) == 0) out[out_off] = (accumulate ? out[out_off] : 0.0f) + total;
}

// parts[g] = the sum of the squares of work-group g's share of x (float32, n elements), items striding over
// the whole launch; sum_into then adds the parts to out (op::SumSquares).
__kernel __attribute__((reqd_work_group_size(REDUCE_GROUP, 1, 1))) void sum_squares_parts(
    __global const float* x, long x_off, long n, __global float* parts) {
  __local float scratch[REDUCE_GROUP];
  float sum = 0.0f;
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) sum += x[x_off + i] * x[x_off + i];
  const float total = group_sum(scratch, sum);
  if (get_local_id(0) == 0) parts[get_group_id(0)] = total;
}

// ---- cross_entropy ----

// One work-group per row of logits (R, V): row_loss[r] = log sum exp - (logits[label] - max) (0 for a row
// labelled -100, NaN for a label outside the row, which the CPU reports), and the row of dlogits = (softmax -
// onehot(label)) * grad_scale. sum_into then sums row_loss into the loss. Every item runs every barrier, for
// PoCL's work-group loops, so an ignored row is computed and then written as zeros.
__kernel __attribute__((reqd_work_group_size(REDUCE_GROUP, 1, 1))) void cross_entropy(
    __global const ELEM* logits, long logits_off, __global const int* labels, long labels_off, float grad_scale,
    __global float* row_loss, __global ELEM* dlogits, long dlogits_off, int V) {
  __local float scratch[REDUCE_GROUP];
  const int lid = get_local_id(0), r = get_group_id(0);
  const long x = logits_off + (long)r * V, d = dlogits_off + (long)r * V;
  const int label = labels[labels_off + r];
  const bool ignored = label == -100, valid = label >= 0 && label < V;
  float max_value = -INFINITY;
  for (int i = lid; i < V; i += REDUCE_GROUP) max_value = fmax(max_value, LOAD(logits, x + i));
  max_value = group_max(scratch, max_value);
  float sum = 0.0f;
  for (int i = lid; i < V; i += REDUCE_GROUP) sum += exp(LOAD(logits, x + i) - max_value);
  const float log_sum = log(group_sum(scratch, sum));
  if (lid == 0)
    row_loss[r] = ignored ? 0.0f : valid ? log_sum - (LOAD(logits, x + label) - max_value) : NAN;
  barrier(CLK_GLOBAL_MEM_FENCE);  // the label's logit is read before another item may overwrite it
  for (int i = lid; i < V; i += REDUCE_GROUP) {
    const float p = exp(LOAD(logits, x + i) - max_value - log_sum);
    STORE(ignored ? 0.0f : (p - (i == label ? 1.0f : 0.0f)) * grad_scale, dlogits, d + i);
  }
}

// ---- adamw ----

// One AdamW step of element i of the float32 state; the scalars come from the host, rounded from double as
// the CPU rounds them. `param` (the model's copy in the dtype) is null or gets the new master value.
__kernel void adamw(__global float* w, long w_off, __global const float* grad, long grad_off, __global float* m,
                    long m_off, __global float* v, long v_off, __global ELEM* param, long param_off, long n,
                    float grad_scale, float decay, float one_minus_beta1, float beta2, float one_minus_beta2,
                    float step_size, float bias2_sqrt, float eps) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const float g = grad[grad_off + i] * grad_scale;
  float wi = w[w_off + i] * decay, mi = m[m_off + i], vi = v[v_off + i];
  mi += (g - mi) * one_minus_beta1;
  vi = vi * beta2 + one_minus_beta2 * g * g;
  wi -= step_size * mi / (sqrt(vi) / bias2_sqrt + eps);
  w[w_off + i] = wi;
  m[m_off + i] = mi;
  v[v_off + i] = vi;
  if (param) STORE(wi, param, param_off + i);
}
