// Causal grouped-query attention over the paged KV cache in the dtype DTYPE (op::PagedAttention in op_set.h;
// cpu/kernels.cpp is the reference). One work-group of ATT_GROUP items per (query row, head), group index
// row * heads + head. HEAD_DIM is a build option, so each item keeps its share of the output (dimensions lid,
// lid + ATT_GROUP, ...) in registers.
#define DIMS_PER_ITEM ((HEAD_DIM + ATT_GROUP - 1) / ATT_GROUP)

// What one (row, head) attends to: keys first..last of its sequence, read through its block table.
typedef struct {
  int first, last;
  int kv_head;
  __global const int* blocks;
} Keys;

// The keys query row `row` of head `head` attends to.
Keys keys_of(__global const int* query_start, __global const int* context_lens,
             __global const int* block_tables, __global const int* positions, int num_seqs, int heads,
             int kv_heads, int max_blocks, int window, int row, int head) {
  const int seq = sequence_of(query_start, num_seqs, row);
  const int pos = positions[row];
  Keys keys;
  keys.last = min(pos, context_lens[seq] - 1);
  keys.first = window > 0 ? max(0, pos - window + 1) : 0;
  keys.kv_head = head / (heads / kv_heads);
  keys.blocks = block_tables + (long)seq * max_blocks;
  return keys;
}

// Element offset of key (or value) j of `keys` in a cache laid out (blocks, block_size, kv_heads, HEAD_DIM),
// from the cache's first element.
long cache_row(const Keys* keys, int j, int block_size, int kv_heads) {
  const long block = keys->blocks[j / block_size];
  return ((block * block_size + j % block_size) * kv_heads + keys->kv_head) * HEAD_DIM;
}

// q . k in float, q in local memory and k the key at element `k_row` of the cache: eight elements (16 bytes in
// the 2-byte dtypes) a load where the cache allows it.
float key_dot(__local const float* q, __global const ELEM* cache_k, long k_row) {
  float d = 0.0f;
#if HEAD_DIM % 8 == 0
  if ((k_row & 7) == 0) {
    for (int i = 0; i < HEAD_DIM; i += 8) d += sum8(vload8(i / 8, q) * LOAD8(cache_k, k_row + i));
    return d;
  }
#endif
  for (int i = 0; i < HEAD_DIM; ++i) d += q[i] * LOAD(cache_k, k_row + i);
  return d;
}

// The arguments both forms share; each buffer with its element offset.
#define ATTENTION_ARGS                                                                                       \
  __global const ELEM *q, long q_off, __global const ELEM *cache_k, long cache_k_off,                        \
      __global const ELEM *cache_v, long cache_v_off, __global const int *query_start, long query_start_off, \
      __global const int *context_lens, long context_lens_off, __global const int *block_tables,             \
      long block_tables_off, __global const int *positions, long positions_off, int num_seqs, int heads,     \
      int kv_heads, int block_size, int max_blocks, float scale, int window, __global ELEM *out,             \
      long out_off

// Sets up row, head, keys, the query (as floats) in local memory and the output row's offset `o`, for the
// group index `group`.
#define ATTENTION_PROLOGUE(group)                                                                        \
  const int lid = get_local_id(0);                                                                       \
  const int row = (group) / heads, head = (group) % heads;                                               \
  const Keys keys = keys_of(query_start + query_start_off, context_lens + context_lens_off,              \
                            block_tables + block_tables_off, positions + positions_off, num_seqs, heads, \
                            kv_heads, max_blocks, window, row, head);                                    \
  __local float qs[HEAD_DIM];                                                                            \
  for (int i = lid; i < HEAD_DIM; i += ATT_GROUP)                                                        \
    qs[i] = LOAD(q, q_off + ((long)row * heads + head) * HEAD_DIM + i);                                  \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                          \
  const long o = out_off + ((long)row * heads + head) * HEAD_DIM

// The fused form (flash, as sdpa): one pass with a running maximum, in float but for the weights of the values,
// ATT_GROUP keys at a time: each item scores one key of the tile, then every item rescales what it summed under
// the old maximum and adds the tile's values for its dimensions. A row's keys may be split into
// get_num_groups(1) equal parts (a decode step has too few rows to fill the device): each part then writes its
// state (maximum, denominator, unnormalised output) to `partial`, and attention_combine merges them.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_flash(ATTENTION_ARGS,
                                                                                     __global float* partial) {
  ATTENTION_PROLOGUE(get_group_id(0));
  const int split = get_group_id(1), splits = get_num_groups(1);
  const int chunk = (keys.last - keys.first + 1 + splits - 1) / splits;
  const int begin = keys.first + split * chunk, end = min(keys.last + 1, begin + chunk);
  __local float p[ATT_GROUP];
  __local long rows[ATT_GROUP];
  float acc[DIMS_PER_ITEM];
  for (int i = 0; i < DIMS_PER_ITEM; ++i) acc[i] = 0.0f;
  float max_score = -INFINITY, denom = 0.0f;
  for (int j0 = begin; j0 < end; j0 += ATT_GROUP) {
    // The loops below run over the whole tile, a constant count the compiler unrolls so that many loads are in
    // flight at once: the items past the keys' end weigh 0 and point at the last key.
    const int count = min(ATT_GROUP, end - j0);
    rows[lid] = cache_row(&keys, j0 + min(lid, count - 1), block_size, kv_heads);
    const float score = lid < count ? key_dot(qs, cache_k, cache_k_off + rows[lid]) * scale : -INFINITY;
    p[lid] = score;
    barrier(CLK_LOCAL_MEM_FENCE);
    float new_max = max_score;
    for (int i = 0; i < ATT_GROUP; ++i) new_max = fmax(new_max, p[i]);
    barrier(CLK_LOCAL_MEM_FENCE);
    p[lid] = lid < count ? exp(score - new_max) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    const float c = exp(max_score - new_max);  // 0 on the first tile
    float tile_sum = 0.0f;
    for (int i = 0; i < ATT_GROUP; ++i) tile_sum += p[i];
    denom = denom * c + tile_sum;
    // Each weight multiplies the values rounded to the dtype, while the denominator sums it unrounded, as
    // torch's flash attention kernels compute P V in the dtype.
    barrier(CLK_LOCAL_MEM_FENCE);
    p[lid] = ROUND(p[lid]);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int d = 0; d < DIMS_PER_ITEM; ++d) {
      const int dim = lid + d * ATT_GROUP;
      if (dim >= HEAD_DIM) break;
      float a = acc[d] * c;
      for (int i = 0; i < ATT_GROUP; ++i) a += p[i] * LOAD(cache_v, cache_v_off + rows[i] + dim);
      acc[d] = a;
    }
    max_score = new_max;
    barrier(CLK_LOCAL_MEM_FENCE);  // p and rows are rewritten by the next tile
  }
  if (splits > 1) {
    __global float* state = partial + ((long)get_group_id(0) * splits + split) * (HEAD_DIM + 2);
    if (lid == 0) {
      state[0] = max_score;
      state[1] = denom;
    }
    for (int d = 0; d < DIMS_PER_ITEM; ++d) {
      const int dim = lid + d * ATT_GROUP;
      if (dim < HEAD_DIM) state[2 + dim] = acc[d];
    }
    return;
  }
  const float inv = end > begin ? 1.0f / denom : 0.0f;
  for (int d = 0; d < DIMS_PER_ITEM; ++d) {
    const int dim = lid + d * ATT_GROUP;
    if (dim < HEAD_DIM) STORE(acc[d] * inv, out, o + dim);
  }
}

// The output of (row, head) group from the `splits` partial states attention_flash wrote for it: each split's
// sums rescaled to the largest maximum. A row with no keys (all splits empty) gets zeros.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_combine(
    __global const float* partial, int splits, __global ELEM* out, long out_off) {
  const int lid = get_local_id(0), group = get_group_id(0);
  __global const float* states = partial + (long)group * splits * (HEAD_DIM + 2);
  float overall = -INFINITY;
  for (int s = 0; s < splits; ++s) overall = fmax(overall, states[s * (HEAD_DIM + 2)]);
  float denom = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float m = states[s * (HEAD_DIM + 2)];
    if (m > -INFINITY) denom += states[s * (HEAD_DIM + 2) + 1] * exp(m - overall);
  }
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  for (int dim = lid; dim < HEAD_DIM; dim += ATT_GROUP) {
    float a = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float m = states[s * (HEAD_DIM + 2)];
      if (m > -INFINITY) a += states[s * (HEAD_DIM + 2) + 2 + dim] * exp(m - overall);
    }
    STORE(a * inv, out, out_off + (long)group * HEAD_DIM + dim);
  }
}

// The eager form, as Transformers' eager_attention_forward: every score of the row, rounded to the dtype
// after q . k and again after the scale, into `scores` (max_context floats per work-group, of a launch
// covering rows from row_begin); a float softmax, each probability rounded to the dtype; then the
// probabilities times the values. A row with more keys than max_context (metadata that understates it) gets
// NaN rather than a write past its scores.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_eager(ATTENTION_ARGS,
                                                                                     __global float* scores,
                                                                                     int max_context,
                                                                                     int row_begin) {
  ATTENTION_PROLOGUE(get_group_id(0) + row_begin * heads);
  __local float scratch[ATT_GROUP];
  __global float* s = scores + (long)get_group_id(0) * max_context;
  const int n = keys.last - keys.first + 1;
  if (n > max_context) {
    for (int i = lid; i < HEAD_DIM; i += ATT_GROUP) STORE(NAN, out, o + i);
    return;
  }
  float item_max = -INFINITY;
  for (int j = lid; j < n; j += ATT_GROUP) {
    const long k_row = cache_k_off + cache_row(&keys, keys.first + j, block_size, kv_heads);
    s[j] = ROUND(ROUND(key_dot(qs, cache_k, k_row)) * scale);
    item_max = fmax(item_max, s[j]);
  }
  const float max_score = group_max(scratch, item_max);
  float item_sum = 0.0f;
  for (int j = lid; j < n; j += ATT_GROUP) item_sum += s[j] = exp(s[j] - max_score);
  const float denom = group_sum(scratch, item_sum);
  for (int j = lid; j < n; j += ATT_GROUP) s[j] = ROUND(s[j] / denom);
  barrier(CLK_GLOBAL_MEM_FENCE);  // every item reads every probability below
  for (int d = 0; d < DIMS_PER_ITEM; ++d) {
    const int dim = lid + d * ATT_GROUP;
    if (dim >= HEAD_DIM) break;
    float a = 0.0f;
    for (int j = 0; j < n; ++j)
      a += s[j] * LOAD(cache_v, cache_v_off + cache_row(&keys, keys.first + j, block_size, kv_heads) + dim);
    STORE(a, out, o + dim);
  }
}
