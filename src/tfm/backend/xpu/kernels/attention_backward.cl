// Causal grouped-query attention's backward (op::AttentionBackward in op_set.h; cpu/training.cpp is the
// reference) in the dtype DTYPE for heads of HEAD_DIM, ATT_GROUP items a work-group. Sequence s is rows
// [starts[s], starts[s + 1]) at positions 0, 1, ...; q, out, dout and dq are (T, heads, HEAD_DIM), k, v, dk
// and dv (T, kv_heads, HEAD_DIM). Two kernels, so that every output has one writer: attention_backward_dq,
// one work-group per (query row, head), recomputes the row's float32 softmax, writes dq and keeps the row's
// statistics (maximum score, denominator, dout . out) in `stats`; attention_backward_dkv, one work-group per
// (key row, kv head), then sums dk and dv over the (query row, head) pairs that see the key.
#define DIMS_PER_ITEM ((HEAD_DIM + ATT_GROUP - 1) / ATT_GROUP)

// a . b for a head in local memory and one at element b_row of b.
float head_dot(__local const float* a, __global const ELEM* b, long b_row) {
  float d = 0.0f;
  for (int c = 0; c < HEAD_DIM; ++c) d += a[c] * LOAD(b, b_row + c);
  return d;
}

// Element offset of (row, head) in a tensor of `heads` heads a row.
long head_row(int row, int head, int heads) {
  return ((long)row * heads + head) * HEAD_DIM;
}

#define BACKWARD_ARGS                                                                                      \
  __global const ELEM *q, long q_off, __global const ELEM *k, long k_off, __global const ELEM *v,            \
      long v_off, __global const ELEM *dout, long dout_off, __global const int *starts, long starts_off,     \
      int num_seqs, int heads, int kv_heads, float scale, int window, __global float *stats

// For query row i (position pos, keys j0..pos): P = softmax(scale q k^T), dP = dout v^T,
// dS = P (dP - dout . out) scale, dq = dS k.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_backward_dq(
    BACKWARD_ARGS, __global const ELEM* out, long out_off, __global ELEM* dq, long dq_off) {
  __local float qs[HEAD_DIM], gs[HEAD_DIM], scratch[ATT_GROUP], ds[ATT_GROUP];
  const int lid = get_local_id(0), group = get_group_id(0);
  const int row = group / heads, head = group % heads, kv_head = head / (heads / kv_heads);
  const int first = starts[starts_off + sequence_of(starts + starts_off, num_seqs, row)];
  const int pos = row - first, j0 = window > 0 ? max(0, pos - window + 1) : 0;
  const long qr = head_row(row, head, heads);
  float item_dot = 0.0f;
  for (int c = lid; c < HEAD_DIM; c += ATT_GROUP) {
    qs[c] = LOAD(q, q_off + qr + c);
    gs[c] = LOAD(dout, dout_off + qr + c);
    item_dot += gs[c] * LOAD(out, out_off + qr + c);
  }
  const float out_dot = group_sum(scratch, item_dot);  // its barriers also publish qs and gs
  // Each item's running maximum and denominator over its keys, then the group's.
  float item_max = -INFINITY, item_sum = 0.0f;
  for (int j = j0 + lid; j <= pos; j += ATT_GROUP) {
    const float s = head_dot(qs, k, k_off + head_row(first + j, kv_head, kv_heads)) * scale;
    if (s > item_max) {
      item_sum = item_sum * exp(item_max - s) + 1.0f;
      item_max = s;
    } else {
      item_sum += exp(s - item_max);
    }
  }
  const float max_score = group_max(scratch, item_max);
  const float denom = group_sum(scratch, item_sum * exp(item_max - max_score));
  float acc[DIMS_PER_ITEM];
  for (int e = 0; e < DIMS_PER_ITEM; ++e) acc[e] = 0.0f;
  for (int t0 = j0; t0 <= pos; t0 += ATT_GROUP) {  // ATT_GROUP keys a tile, one per item
    const int j = t0 + lid;
    float d = 0.0f;
    if (j <= pos) {
      const long kr = head_row(first + j, kv_head, kv_heads);
      const float p = exp(head_dot(qs, k, k_off + kr) * scale - max_score) / denom;
      d = p * (head_dot(gs, v, v_off + kr) - out_dot) * scale;
    }
    ds[lid] = d;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int count = min(ATT_GROUP, pos - t0 + 1);
    for (int t = 0; t < count; ++t) {
      const long kr = k_off + head_row(first + t0 + t, kv_head, kv_heads);
      for (int e = 0; e < DIMS_PER_ITEM; ++e) {
        const int c = lid + e * ATT_GROUP;
        if (c < HEAD_DIM) acc[e] += ds[t] * LOAD(k, kr + c);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // ds is rewritten by the next tile
  }
  for (int e = 0; e < DIMS_PER_ITEM; ++e) {
    const int c = lid + e * ATT_GROUP;
    if (c < HEAD_DIM) STORE(acc[e], dq, dq_off + qr + c);
  }
  if (lid == 0) {
    __global float* row_stats = stats + (long)group * 3;
    row_stats[0] = max_score;
    row_stats[1] = denom;
    row_stats[2] = out_dot;
  }
}

// For key row j (position pos) of kv head g: the pairs (query row i, head h of g) with i at positions
// pos..last (the window's reach), ATT_GROUP pairs a tile, one per item: P and dS as attention_backward_dq
// computes them, from its stats; then dk = dS^T q and dv = P^T dout.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_backward_dkv(
    BACKWARD_ARGS, __global ELEM* dk, long dk_off, __global ELEM* dv, long dv_off) {
  __local float ks[HEAD_DIM], vs[HEAD_DIM], ps[ATT_GROUP], ds[ATT_GROUP];
  const int lid = get_local_id(0), group = get_group_id(0);
  const int row = group / kv_heads, kv_head = group % kv_heads, group_heads = heads / kv_heads;
  __global const int* seq = starts + starts_off + sequence_of(starts + starts_off, num_seqs, row);
  const int first = seq[0], pos = row - first, n = seq[1] - first;
  const int last = window > 0 ? min(n - 1, pos + window - 1) : n - 1;
  const long kr = head_row(row, kv_head, kv_heads);
  for (int c = lid; c < HEAD_DIM; c += ATT_GROUP) {
    ks[c] = LOAD(k, k_off + kr + c);
    vs[c] = LOAD(v, v_off + kr + c);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int pairs = (last - pos + 1) * group_heads;
  float dk_acc[DIMS_PER_ITEM], dv_acc[DIMS_PER_ITEM];
  for (int e = 0; e < DIMS_PER_ITEM; ++e) dk_acc[e] = dv_acc[e] = 0.0f;
  for (int e0 = 0; e0 < pairs; e0 += ATT_GROUP) {
    const int e = e0 + lid;
    float p = 0.0f, d = 0.0f;
    if (e < pairs) {
      const int i = row + e / group_heads, h = kv_head * group_heads + e % group_heads;
      const long qr = head_row(i, h, heads);
      __global const float* row_stats = stats + ((long)i * heads + h) * 3;
      p = exp(head_dot(ks, q, q_off + qr) * scale - row_stats[0]) / row_stats[1];
      d = p * (head_dot(vs, dout, dout_off + qr) - row_stats[2]) * scale;
    }
    ps[lid] = p;
    ds[lid] = d;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int count = min(ATT_GROUP, pairs - e0);
    for (int t = 0; t < count; ++t) {
      const int pair = e0 + t;
      const long qr = head_row(row + pair / group_heads, kv_head * group_heads + pair % group_heads, heads);
      for (int a = 0; a < DIMS_PER_ITEM; ++a) {
        const int c = lid + a * ATT_GROUP;
        if (c < HEAD_DIM) {
          dk_acc[a] += ds[t] * LOAD(q, q_off + qr + c);
          dv_acc[a] += ps[t] * LOAD(dout, dout_off + qr + c);
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int a = 0; a < DIMS_PER_ITEM; ++a) {
    const int c = lid + a * ATT_GROUP;
    if (c < HEAD_DIM) {
      STORE(dk_acc[a], dk, dk_off + kr + c);
      STORE(dv_acc[a], dv, dv_off + kr + c);
    }
  }
}
