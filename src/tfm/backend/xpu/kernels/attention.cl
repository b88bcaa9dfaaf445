// Causal grouped-query attention over the paged KV cache (op_kernels.h; cpu/kernels.cpp is the reference).
// One work-group of ATT_GROUP items per (query row, head), group index row * heads + head. HEAD_DIM is a
// build option, so each item keeps its share of the output (dimensions lid, lid + ATT_GROUP, ...) in
// registers.
#define DIMS_PER_ITEM ((HEAD_DIM + ATT_GROUP - 1) / ATT_GROUP)

// What one (row, head) attends to: keys first..last of its sequence, read through its block table.
typedef struct {
  int first, last;
  int kv_head;
  __global const int* blocks;
} Keys;

// The sequence holding query row `row`: the last s with query_start[s] <= row (empty sequences are skipped).
Keys keys_of(__global const int* query_start, __global const int* context_lens,
             __global const int* block_tables, __global const int* positions, int num_seqs, int heads,
             int kv_heads, int max_blocks, int window, int row, int head) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (query_start[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int pos = positions[row];
  Keys keys;
  keys.last = min(pos, context_lens[lo] - 1);
  keys.first = window > 0 ? max(0, pos - window + 1) : 0;
  keys.kv_head = head / (heads / kv_heads);
  keys.blocks = block_tables + (long)lo * max_blocks;
  return keys;
}

// Element offset of key (or value) j of `keys` in a cache laid out (blocks, block_size, kv_heads, HEAD_DIM).
long cache_row(const Keys* keys, int j, int block_size, int kv_heads) {
  const long block = keys->blocks[j / block_size];
  return ((block * block_size + j % block_size) * kv_heads + keys->kv_head) * HEAD_DIM;
}

float scaled_dot(__local const float* q, const __global float* k, float scale) {
  float d = 0.0f;
  for (int i = 0; i < HEAD_DIM; ++i) d += q[i] * k[i];
  return d * scale;
}

// The arguments both forms share; each buffer with its element offset.
#define ATTENTION_ARGS                                                                           \
  __global const float *q, long q_off, __global const float *cache_k, long cache_k_off,          \
      __global const float *cache_v, long cache_v_off, __global const int *query_start,          \
      long query_start_off, __global const int *context_lens, long context_lens_off,             \
      __global const int *block_tables, long block_tables_off, __global const int *positions,    \
      long positions_off, int num_seqs, int heads, int kv_heads, int block_size, int max_blocks, \
      float scale, int window, __global float *out, long out_off

// Sets up row, head, keys, the query in local memory and the output row, for the group index `group`.
#define ATTENTION_PROLOGUE(group)                                                                        \
  const int lid = get_local_id(0);                                                                       \
  const int row = (group) / heads, head = (group) % heads;                                               \
  cache_k += cache_k_off;                                                                                \
  cache_v += cache_v_off;                                                                                \
  const Keys keys = keys_of(query_start + query_start_off, context_lens + context_lens_off,              \
                            block_tables + block_tables_off, positions + positions_off, num_seqs, heads, \
                            kv_heads, max_blocks, window, row, head);                                    \
  __local float qs[HEAD_DIM];                                                                            \
  for (int i = lid; i < HEAD_DIM; i += ATT_GROUP)                                                        \
    qs[i] = q[q_off + ((long)row * heads + head) * HEAD_DIM + i];                                        \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                          \
  __global float* o = out + out_off + ((long)row * heads + head) * HEAD_DIM

// One pass with a running maximum (the fused form), ATT_GROUP keys at a time: each item scores one key of the
// tile, then every item rescales what it summed under the old maximum and adds the tile's values for its
// dimensions.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_online(ATTENTION_ARGS) {
  ATTENTION_PROLOGUE(get_group_id(0));
  __local float p[ATT_GROUP];
  __local long rows[ATT_GROUP];
  float acc[DIMS_PER_ITEM];
  for (int i = 0; i < DIMS_PER_ITEM; ++i) acc[i] = 0.0f;
  float max_score = -INFINITY, denom = 0.0f;
  for (int j0 = keys.first; j0 <= keys.last; j0 += ATT_GROUP) {
    const int count = min(ATT_GROUP, keys.last - j0 + 1);
    float score = -INFINITY;
    if (lid < count) {
      rows[lid] = cache_row(&keys, j0 + lid, block_size, kv_heads);
      score = scaled_dot(qs, cache_k + rows[lid], scale);
    }
    p[lid] = score;
    barrier(CLK_LOCAL_MEM_FENCE);
    float new_max = max_score;
    for (int i = 0; i < count; ++i) new_max = fmax(new_max, p[i]);
    barrier(CLK_LOCAL_MEM_FENCE);
    p[lid] = lid < count ? exp(score - new_max) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    const float c = exp(max_score - new_max);  // 0 on the first tile
    float tile_sum = 0.0f;
    for (int i = 0; i < count; ++i) tile_sum += p[i];
    denom = denom * c + tile_sum;
    for (int d = 0; d < DIMS_PER_ITEM; ++d) {
      const int dim = lid + d * ATT_GROUP;
      if (dim >= HEAD_DIM) break;
      float a = acc[d] * c;
      for (int i = 0; i < count; ++i) a += p[i] * cache_v[rows[i] + dim];
      acc[d] = a;
    }
    max_score = new_max;
    barrier(CLK_LOCAL_MEM_FENCE);  // p and rows are rewritten by the next tile
  }
  const float inv = keys.last >= keys.first ? 1.0f / denom : 0.0f;
  for (int d = 0; d < DIMS_PER_ITEM; ++d) {
    const int dim = lid + d * ATT_GROUP;
    if (dim < HEAD_DIM) o[dim] = acc[d] * inv;
  }
}

// The eager form: every score of the row into `scores` (max_context floats per work-group, of a launch
// covering rows from row_begin), then a float32 softmax, then the probabilities times the values. A row with
// more keys than max_context (metadata that understates it) gets NaN rather than a write past its scores.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_eager(ATTENTION_ARGS,
                                                                                     __global float* scores,
                                                                                     int max_context,
                                                                                     int row_begin) {
  ATTENTION_PROLOGUE(get_group_id(0) + row_begin * heads);
  __local float scratch[ATT_GROUP];
  __global float* s = scores + (long)get_group_id(0) * max_context;
  const int n = keys.last - keys.first + 1;
  if (n > max_context) {
    for (int i = lid; i < HEAD_DIM; i += ATT_GROUP) o[i] = NAN;
    return;
  }
  float item_max = -INFINITY;
  for (int j = lid; j < n; j += ATT_GROUP) {
    s[j] = scaled_dot(qs, cache_k + cache_row(&keys, keys.first + j, block_size, kv_heads), scale);
    item_max = fmax(item_max, s[j]);
  }
  const float max_score = group_max(scratch, item_max);
  float item_sum = 0.0f;
  for (int j = lid; j < n; j += ATT_GROUP) item_sum += s[j] = exp(s[j] - max_score);
  const float denom = group_sum(scratch, item_sum);
  barrier(CLK_GLOBAL_MEM_FENCE);  // every item reads every score below
  for (int d = 0; d < DIMS_PER_ITEM; ++d) {
    const int dim = lid + d * ATT_GROUP;
    if (dim >= HEAD_DIM) break;
    float a = 0.0f;
    for (int j = 0; j < n; ++j)
      a += s[j] / denom * cache_v[cache_row(&keys, keys.first + j, block_size, kv_heads) + dim];
    o[dim] = a;
  }
}
