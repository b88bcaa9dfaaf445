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

#ifdef BWD_BIG
// The tiled forms, for head sizes up to 128 (programs.cpp sizes the tiles so that local memory stays within the
// 32 KB every OpenCL device has): the same sums, but a work-group takes BWD_BIG query rows of a sequence (or
// BWD_BIG keys) and meets their partners BWD_SMALL at a time in local memory, so that each head vector read
// from memory serves a tile's rows instead of one. Items form 8 groups of 8: group g takes the tile's rows g,
// g + 8, ... and item i of it the partners (or the output dimensions) i, i + 8, ...
#define BWD_LD (HEAD_DIM + 1)  // a padded row, so that the 8 items reading one column hit 8 memory banks
#define W_LD (BWD_SMALL + 1)
#define ITEM_BIG (BWD_BIG / 8)
#define ITEM_SMALL (BWD_SMALL / 8)
#define ITEM_DIMS ((HEAD_DIM + 7) / 8)

// Rows first .. first + count - 1 of one head of x, laid out (rows, heads, HEAD_DIM), into the first n rows of
// `tile` as floats; the rows past count as zeros.
void load_head_rows(__local float* tile, int n, __global const ELEM* x, long x_off, int first, int count,
                    int heads, int head) {
  for (int i = get_local_id(0); i < n * HEAD_DIM; i += ATT_GROUP) {
    const int r = i / HEAD_DIM, c = i % HEAD_DIM;
    tile[r * BWD_LD + c] = r < count ? LOAD(x, x_off + head_row(first + r, head, heads) + c) : 0.0f;
  }
}

float local_dot(__local const float* a, __local const float* b) {
  float d = 0.0f;
  for (int c = 0; c < HEAD_DIM; ++c) d += a[c] * b[c];
  return d;
}

// Whether query i of a sequence sees its key j.
bool sees(int i, int j, int window) {
  return j <= i && (window <= 0 || i - j < window);
}

// attention_backward_dq for BWD_BIG query rows of a sequence and a head (group (tile, head)): the rows' maximum
// and denominator in a first pass over the keys, then dq in a second, the score gradients of BWD_SMALL keys at a
// time in local memory.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_backward_dq_tiles(
    BACKWARD_ARGS, __global const ELEM* out, long out_off, __global ELEM* dq, long dq_off) {
  __local float qs[BWD_BIG * BWD_LD], gs[BWD_BIG * BWD_LD], ks[BWD_SMALL * BWD_LD], vs[BWD_SMALL * BWD_LD];
  __local float w[BWD_BIG * W_LD];  // scores, then score gradients
  __local float row_max[BWD_BIG], row_denom[BWD_BIG], row_delta[BWD_BIG];
  const int lid = get_local_id(0), group = lid / 8, lane = lid % 8;
  const int head = get_group_id(1), kv_head = head / (heads / kv_heads);
  // Every item reaches every barrier below (PoCL's work-group loops need that): a work-group past the tiles
  // takes a tile of no rows.
  int seq, tile;
  const bool found = find_tile(starts + starts_off, num_seqs, BWD_BIG, get_group_id(0), &seq, &tile);
  const int start = found ? starts[starts_off + seq] : 0, i0 = found ? tile * BWD_BIG : 0;
  const int rows = found ? min(BWD_BIG, starts[starts_off + seq + 1] - start - i0) : 0;
  load_head_rows(qs, BWD_BIG, q, q_off, start + i0, rows, heads, head);
  load_head_rows(gs, BWD_BIG, dout, dout_off, start + i0, rows, heads, head);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = lid; r < BWD_BIG; r += ATT_GROUP) {
    float d = 0.0f;
    if (r < rows) {
      const long at = out_off + head_row(start + i0 + r, head, heads);
      for (int c = 0; c < HEAD_DIM; ++c) d += gs[r * BWD_LD + c] * LOAD(out, at + c);
    }
    row_delta[r] = d;
  }
  const int first = window > 0 ? max(0, i0 - window + 1) : 0, last = i0 + rows - 1;
  // Pass 1: the first BWD_BIG items each keep one row's running maximum and denominator.
  float m = -INFINITY, l = 0.0f;
  for (int j0 = first; j0 <= last; j0 += BWD_SMALL) {
    load_head_rows(ks, BWD_SMALL, k, k_off, start + j0, last - j0 + 1, kv_heads, kv_head);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int a = 0; a < ITEM_BIG; ++a) {
      const int r = group + 8 * a;
      for (int b = 0; b < ITEM_SMALL; ++b) {
        const int kk = lane + 8 * b;
        w[r * W_LD + kk] = r < rows && sees(i0 + r, j0 + kk, window)
                               ? local_dot(qs + r * BWD_LD, ks + kk * BWD_LD) * scale
                               : -INFINITY;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < BWD_BIG) {
      float new_max = m;
      for (int kk = 0; kk < BWD_SMALL; ++kk) new_max = fmax(new_max, w[lid * W_LD + kk]);
      if (new_max > -INFINITY) {
        l *= exp(m - new_max);
        for (int kk = 0; kk < BWD_SMALL; ++kk) l += exp(w[lid * W_LD + kk] - new_max);
        m = new_max;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // ks and w are rewritten by the next tile
  }
  if (lid < BWD_BIG) {
    row_max[lid] = m;
    row_denom[lid] = l;
  }
  // Pass 2: dS = P (dout . v - delta) scale a tile of keys at a time, then dq += dS k.
  float acc[ITEM_BIG][ITEM_DIMS];
  for (int a = 0; a < ITEM_BIG; ++a)
    for (int d = 0; d < ITEM_DIMS; ++d) acc[a][d] = 0.0f;
  for (int j0 = first; j0 <= last; j0 += BWD_SMALL) {
    load_head_rows(ks, BWD_SMALL, k, k_off, start + j0, last - j0 + 1, kv_heads, kv_head);
    load_head_rows(vs, BWD_SMALL, v, v_off, start + j0, last - j0 + 1, kv_heads, kv_head);
    barrier(CLK_LOCAL_MEM_FENCE);  // also publishes row_max and row_denom on the first tile
    for (int a = 0; a < ITEM_BIG; ++a) {
      const int r = group + 8 * a;
      for (int b = 0; b < ITEM_SMALL; ++b) {
        const int kk = lane + 8 * b;
        float ds = 0.0f;
        if (r < rows && sees(i0 + r, j0 + kk, window)) {
          const float p = exp(local_dot(qs + r * BWD_LD, ks + kk * BWD_LD) * scale - row_max[r]) / row_denom[r];
          ds = p * (local_dot(gs + r * BWD_LD, vs + kk * BWD_LD) - row_delta[r]) * scale;
        }
        w[r * W_LD + kk] = ds;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int a = 0; a < ITEM_BIG; ++a) {
      const int r = group + 8 * a;
      for (int kk = 0; kk < BWD_SMALL; ++kk) {
        const float ds = w[r * W_LD + kk];
        for (int d = 0; d < ITEM_DIMS; ++d) {
          const int c = lane + 8 * d;
          if (c < HEAD_DIM) acc[a][d] += ds * ks[kk * BWD_LD + c];
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // ks, vs and w are rewritten by the next tile
  }
  for (int a = 0; a < ITEM_BIG; ++a) {
    const int r = group + 8 * a;
    if (r >= rows) continue;
    const long at = dq_off + head_row(start + i0 + r, head, heads);
    for (int d = 0; d < ITEM_DIMS; ++d) {
      const int c = lane + 8 * d;
      if (c < HEAD_DIM) STORE(acc[a][d], dq, at + c);
    }
  }
  if (lid < rows) {
    __global float* row_stats = stats + ((long)(start + i0 + lid) * heads + head) * 3;
    row_stats[0] = row_max[lid];
    row_stats[1] = row_denom[lid];
    row_stats[2] = row_delta[lid];
  }
}

// attention_backward_dkv for BWD_BIG keys of a sequence and a kv head (group (tile, kv head)): over the heads of
// the kv head's group and the query rows that see the keys, BWD_SMALL rows at a time, P and dS as
// attention_backward_dq computes them from its stats, then dk += dS^T q and dv += P^T dout.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_backward_dkv_tiles(
    BACKWARD_ARGS, __global ELEM* dk, long dk_off, __global ELEM* dv, long dv_off) {
  __local float ks[BWD_BIG * BWD_LD], vs[BWD_BIG * BWD_LD], qs[BWD_SMALL * BWD_LD], gs[BWD_SMALL * BWD_LD];
  __local float ps[BWD_BIG * W_LD], ds[BWD_BIG * W_LD];
  __local float q_max[BWD_SMALL], q_denom[BWD_SMALL], q_delta[BWD_SMALL];
  const int lid = get_local_id(0), group = lid / 8, lane = lid % 8;
  const int kv_head = get_group_id(1), group_heads = heads / kv_heads;
  // Every item reaches every barrier below, as in attention_backward_dq_tiles.
  int seq, tile;
  const bool found = find_tile(starts + starts_off, num_seqs, BWD_BIG, get_group_id(0), &seq, &tile);
  const int start = found ? starts[starts_off + seq] : 0;
  const int n = found ? starts[starts_off + seq + 1] - start : 0, j0 = found ? tile * BWD_BIG : 0;
  const int keys = min(BWD_BIG, n - j0);
  const int last = window > 0 ? min(n - 1, j0 + keys - 1 + window - 1) : n - 1;  // the last query seeing one
  load_head_rows(ks, BWD_BIG, k, k_off, start + j0, keys, kv_heads, kv_head);
  load_head_rows(vs, BWD_BIG, v, v_off, start + j0, keys, kv_heads, kv_head);
  float dk_acc[ITEM_BIG][ITEM_DIMS], dv_acc[ITEM_BIG][ITEM_DIMS];
  for (int a = 0; a < ITEM_BIG; ++a)
    for (int d = 0; d < ITEM_DIMS; ++d) dk_acc[a][d] = dv_acc[a][d] = 0.0f;
  for (int head = kv_head * group_heads; head < (kv_head + 1) * group_heads; ++head) {
    for (int i0 = j0; i0 <= last; i0 += BWD_SMALL) {
      const int queries = min(BWD_SMALL, last - i0 + 1);
      load_head_rows(qs, BWD_SMALL, q, q_off, start + i0, queries, heads, head);
      load_head_rows(gs, BWD_SMALL, dout, dout_off, start + i0, queries, heads, head);
      for (int c = lid; c < BWD_SMALL; c += ATT_GROUP) {
        __global const float* row_stats = stats + ((long)(start + i0 + c) * heads + head) * 3;
        q_max[c] = c < queries ? row_stats[0] : 0.0f;
        q_denom[c] = c < queries ? row_stats[1] : 1.0f;
        q_delta[c] = c < queries ? row_stats[2] : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int a = 0; a < ITEM_BIG; ++a) {
        const int r = group + 8 * a;
        for (int b = 0; b < ITEM_SMALL; ++b) {
          const int c = lane + 8 * b;
          float p = 0.0f, d = 0.0f;
          if (r < keys && c < queries && sees(i0 + c, j0 + r, window)) {
            p = exp(local_dot(ks + r * BWD_LD, qs + c * BWD_LD) * scale - q_max[c]) / q_denom[c];
            d = p * (local_dot(vs + r * BWD_LD, gs + c * BWD_LD) - q_delta[c]) * scale;
          }
          ps[r * W_LD + c] = p;
          ds[r * W_LD + c] = d;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int a = 0; a < ITEM_BIG; ++a) {
        const int r = group + 8 * a;
        for (int c = 0; c < BWD_SMALL; ++c) {
          const float p = ps[r * W_LD + c], d = ds[r * W_LD + c];
          for (int e = 0; e < ITEM_DIMS; ++e) {
            const int dim = lane + 8 * e;
            if (dim < HEAD_DIM) {
              dv_acc[a][e] += p * gs[c * BWD_LD + dim];
              dk_acc[a][e] += d * qs[c * BWD_LD + dim];
            }
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);  // qs, gs, the stats, ps and ds are rewritten by the next tile
    }
  }
  for (int a = 0; a < ITEM_BIG; ++a) {
    const int r = group + 8 * a;
    if (r >= keys) continue;
    const long at = head_row(start + j0 + r, kv_head, kv_heads);
    for (int e = 0; e < ITEM_DIMS; ++e) {
      const int dim = lane + 8 * e;
      if (dim < HEAD_DIM) {
        STORE(dk_acc[a][e], dk, dk_off + at + dim);
        STORE(dv_acc[a][e], dv, dv_off + at + dim);
      }
    }
  }
}
#endif
