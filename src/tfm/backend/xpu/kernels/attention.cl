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

// The arguments every form shares after its queries (q, or qkv_attention's fused projection); each buffer with
// its element offset.
#define ATTENTION_CACHE_ARGS                                                                                   \
  __global const ELEM *cache_k, long cache_k_off, __global const ELEM *cache_v, long cache_v_off,            \
      __global const int *query_start, long query_start_off, __global const int *context_lens,               \
      long context_lens_off, __global const int *block_tables, long block_tables_off,                        \
      __global const int *positions, long positions_off, int num_seqs, int heads, int kv_heads, int block_size, \
      int max_blocks, float scale, int window, __global ELEM *out, long out_off
#define ATTENTION_ARGS __global const ELEM *q, long q_off, ATTENTION_CACHE_ARGS

// Sets up row, head, keys and the output row's offset `o` for the group index `group`.
#define ATTENTION_ROW(group)                                                                             \
  const int lid = get_local_id(0);                                                                       \
  const int row = (group) / heads, head = (group) % heads;                                               \
  const Keys keys = keys_of(query_start + query_start_off, context_lens + context_lens_off,              \
                            block_tables + block_tables_off, positions + positions_off, num_seqs, heads, \
                            kv_heads, max_blocks, window, row, head);                                    \
  const long o = out_off + ((long)row * heads + head) * HEAD_DIM

// ATTENTION_ROW, and the query (as floats) in local memory.
#define ATTENTION_PROLOGUE(group)                                         \
  ATTENTION_ROW(group);                                                   \
  __local float qs[HEAD_DIM];                                             \
  for (int i = lid; i < HEAD_DIM; i += ATT_GROUP)                         \
    qs[i] = LOAD(q, q_off + ((long)row * heads + head) * HEAD_DIM + i);   \
  barrier(CLK_LOCAL_MEM_FENCE)

// The output of a (row, head) from the `splits` partial states (maximum, denominator, unnormalised output)
// its parts wrote to `states`: each part's sums rescaled to the largest maximum. A row with no keys (all parts
// empty) gets zeros. The states are read as volatile: other work-groups wrote them, and a cache of this one's
// must not answer for them. The caller's items take dimensions first, first + stride, ...
void combine_splits(__global volatile const float* states, int splits, int first, int stride, __global ELEM* out,
                    long o) {
  float overall = -INFINITY;
  for (int s = 0; s < splits; ++s) overall = fmax(overall, states[s * (HEAD_DIM + 2)]);
  float denom = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float m = states[s * (HEAD_DIM + 2)];
    if (m > -INFINITY) denom += states[s * (HEAD_DIM + 2) + 1] * exp(m - overall);
  }
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  for (int dim = first; dim < HEAD_DIM; dim += stride) {
    float a = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float m = states[s * (HEAD_DIM + 2)];
      if (m > -INFINITY) a += states[s * (HEAD_DIM + 2) + 2 + dim] * exp(m - overall);
    }
    STORE(a * inv, out, o + dim);
  }
}

// The end of one part of a (row, head)'s keys for the caller's items, which hold the output's dimensions first,
// first + stride, ... (acc[d] for dimension first + d * stride, `count` of them): where the keys are not split,
// the output itself (zeros for a row without keys); else the part's state, written by `leader` for the maximum
// and denominator and by every item for its dimensions, into `states` at `split`.
void finish_part(const float* acc, int count, int first, int stride, bool leader, float max_score, float denom,
                 bool has_keys, int split, int splits, __global float* states, __global ELEM* out, long o) {
  const float inv = has_keys ? 1.0f / denom : 0.0f;
  __global float* state = states + split * (HEAD_DIM + 2);
  if (splits > 1 && leader) {
    state[0] = max_score;
    state[1] = denom;
  }
  for (int d = 0; d < count; ++d) {
    const int dim = first + d * stride;
    if (dim >= HEAD_DIM) break;
    if (splits == 1) {
      STORE(acc[d] * inv, out, o + dim);
    } else {
      state[2 + dim] = acc[d];
    }
  }
}

#if HEAD_DIM % 8 == 0
// A tile's values in 16-byte pieces (eight elements; 32 bytes in float32): item (group, piece) adds piece
// `piece` of the value rows of keys group, group + VALUE_GROUPS, ... A piece a load where the dimensions are
// items (each item's share of a row one element a load) waits out a memory latency every few elements.
#define VALUE_PIECES (HEAD_DIM / 8)
#define VALUE_GROUPS (ATT_GROUP / VALUE_PIECES)
#endif

// The keys begin..end-1 of `keys` folded into the running state of attention_flash's items (acc: this item's
// dimensions lid, lid + ATT_GROUP, ... of the unnormalised output; the maximum score; the denominator),
// ATT_GROUP keys at a time: each item scores one key of the tile, then what was summed under the old maximum is
// rescaled and the tile's values added. `p`, `weights`, `rows` and `pieces` are the work-group's.
void flash_keys(__local const float* qs, const Keys* keys, int begin, int end, __global const ELEM* cache_k,
                long cache_k_off, __global const ELEM* cache_v, long cache_v_off, int block_size, int kv_heads,
                float scale, __local float* p, __local float* weights, __local long* rows,
                __local float8* pieces, float* acc, float* max_score, float* denom) {
  const int lid = get_local_id(0);
#if HEAD_DIM % 8 == 0
  const bool by_pieces = (cache_v_off & 7) == 0;  // the rows start where 16-byte loads may
  const int group = lid / VALUE_PIECES, piece = lid % VALUE_PIECES;
  const bool holds_piece = group < VALUE_GROUPS;  // the items past the last whole group load nothing
  float8 sum = 0.0f;
#endif
  for (int j0 = begin; j0 < end; j0 += ATT_GROUP) {
    // The loops below run over the whole tile, a constant count the compiler unrolls so that many loads are in
    // flight at once: the items past the keys' end weigh 0 and point at the last key.
    const int count = min(ATT_GROUP, end - j0);
    rows[lid] = cache_row(keys, j0 + min(lid, count - 1), block_size, kv_heads);
    const float score = lid < count ? key_dot(qs, cache_k, cache_k_off + rows[lid]) * scale : -INFINITY;
    p[lid] = score;
    barrier(CLK_LOCAL_MEM_FENCE);
    float new_max = *max_score;
    for (int i = 0; i < ATT_GROUP; ++i) new_max = fmax(new_max, p[i]);
    const float e = lid < count ? exp(score - new_max) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    p[lid] = e;
    // Each weight multiplies the values rounded to the dtype, while the denominator sums it unrounded, as
    // torch's flash attention kernels compute P V in the dtype.
    weights[lid] = ROUND(e);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float c = exp(*max_score - new_max);  // 0 on the first tile
    float tile_sum = 0.0f;
    for (int i = 0; i < ATT_GROUP; ++i) tile_sum += p[i];
    *denom = *denom * c + tile_sum;
    *max_score = new_max;
#if HEAD_DIM % 8 == 0
    if (by_pieces) {
      if (holds_piece) {
        float8 a = sum * c;
        for (int k = group; k < ATT_GROUP; k += VALUE_GROUPS)
          a += weights[k] * LOAD8(cache_v, cache_v_off + rows[k] + piece * 8);
        sum = a;
      }
      barrier(CLK_LOCAL_MEM_FENCE);  // p, weights and rows are rewritten by the next tile
      continue;
    }
#endif
    for (int d = 0; d < DIMS_PER_ITEM; ++d) {
      const int dim = lid + d * ATT_GROUP;
      if (dim >= HEAD_DIM) break;
      float a = acc[d] * c;
      for (int i = 0; i < ATT_GROUP; ++i) a += weights[i] * LOAD(cache_v, cache_v_off + rows[i] + dim);
      acc[d] = a;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // p, weights and rows are rewritten by the next tile
  }
#if HEAD_DIM % 8 == 0
  if (!by_pieces) return;
  // Each dimension of the output is the sum of its piece over the key groups.
  pieces[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  __local const float* summed = (__local const float*)pieces;
  for (int d = 0; d < DIMS_PER_ITEM; ++d) {
    const int dim = lid + d * ATT_GROUP;
    if (dim >= HEAD_DIM) break;
    float a = 0.0f;
    for (int g = 0; g < VALUE_GROUPS; ++g) a += summed[(g * VALUE_PIECES + dim / 8) * 8 + dim % 8];
    acc[d] = a;
  }
  barrier(CLK_LOCAL_MEM_FENCE);  // pieces may be rewritten after
#endif
}

// The local memory flash_keys takes, declared in the kernel.
#define FLASH_LOCALS                                    \
  __local float p[ATT_GROUP], weights[ATT_GROUP];       \
  __local long rows[ATT_GROUP];                         \
  __local float8 pieces[ATT_GROUP]

// The end of an attention_flash work-group's part of a (row, head)'s keys: its output, or its state and, for the
// last part to arrive, the merge of every part's (finish_part, arrive_last, combine_splits). `last` is the
// work-group's. Every item calls it: it holds barriers.
void end_flash_part(const float* acc, float max_score, float denom, bool has_keys, __global float* partial,
                    __global int* arrivals, __global ELEM* out, long o, __local int* last) {
  const int lid = get_local_id(0), split = get_group_id(1), splits = get_num_groups(1);
  __global float* states = partial + (long)get_group_id(0) * splits * (HEAD_DIM + 2);
  finish_part(acc, DIMS_PER_ITEM, lid, ATT_GROUP, lid == 0, max_score, denom, has_keys, split, splits, states, out,
              o);
  // Each item's state reaches global memory before its part counts itself as arrived. Every item passes the
  // barriers, split or not.
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if (lid == 0) *last = splits > 1 && arrive_last(arrivals + get_group_id(0), splits);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (*last) {
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    combine_splits(states, splits, lid, ATT_GROUP, out, o);
  }
}

// The split of a (row, head)'s keys that work-group (.., split) takes: [*begin, *end), one of `splits` equal parts.
void split_keys(const Keys* keys, int split, int splits, int* begin, int* end) {
  const int chunk = (keys->last - keys->first + 1 + splits - 1) / splits;
  *begin = keys->first + split * chunk;
  *end = min(keys->last + 1, *begin + chunk);
}

// The fused form (flash, as sdpa): one pass with a running maximum, in float but for the weights of the values
// (flash_keys). A row's keys may be split into get_num_groups(1) equal parts (a decode step has too few rows to
// fill the device): each part then writes its state (maximum, denominator, unnormalised output) to `partial`,
// and the last part of the row and head to arrive (counted in `arrivals`, zero between launches) merges them:
// one launch, no wait between work-groups.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_flash(ATTENTION_ARGS,
                                                                                     __global float* partial,
                                                                                     __global int* arrivals) {
  ATTENTION_PROLOGUE(get_group_id(0));
  FLASH_LOCALS;
  __local int last;
  int begin, end;
  split_keys(&keys, get_group_id(1), get_num_groups(1), &begin, &end);
  float acc[DIMS_PER_ITEM];
  for (int i = 0; i < DIMS_PER_ITEM; ++i) acc[i] = 0.0f;
  float max_score = -INFINITY, denom = 0.0f;
  flash_keys(qs, &keys, begin, end, cache_k, cache_k_off, cache_v, cache_v_off, block_size, kv_heads, scale, p,
             weights, rows, pieces, acc, &max_score, &denom);
  end_flash_part(acc, max_score, denom, end > begin, partial, arrivals, out, o, &last);
}

// Whether the work-group of part 0 of query head `head` writes its row's new key and value into the caches
// (qkv_attention's kernels): one a kv head (its first query head), where the row has a slot.
bool writes_new_key(int head, int heads, int kv_heads, int slot) {
  return get_group_id(1) == 0 && head % (heads / kv_heads) == 0 && slot >= 0;
}

// One more key of `score` folded into a running maximum and denominator, as flash_keys folds a tile: returns the
// factor what was summed before is rescaled by, and sets *weight to the key's weight, rounded to the dtype where
// it multiplies the value.
float fold_key(float score, float* max_score, float* denom, float* weight) {
  const float new_max = fmax(*max_score, score);
  const float c = exp(*max_score - new_max), p = exp(score - new_max);
  *denom = *denom * c + p;
  *max_score = new_max;
  *weight = ROUND(p);
  return c;
}

// op::QkvAttention's portable form: attention_flash for a decode step (one row a sequence) whose queries, and
// each row's own new key and value, come from the fused projection qkv (T, (heads + 2 kv_heads) HEAD_DIM), made
// as qkv_rope_cache makes them (qkv_head). The part that holds the row's position takes that key from local
// memory after the cache's keys before it; part 0 of the kv head's first query head writes the key and value
// into the caches at slots[row] (a negative slot: not written), for the steps after this one.
__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void qkv_attention_flash(
    __global const ELEM* qkv, long qkv_off, ATTENTION_CACHE_ARGS, __global float* partial, __global int* arrivals,
    __global const ELEM* q_norm, long q_norm_off, __global const ELEM* k_norm, long k_norm_off, float eps,
    __global const ELEM* cos_table, long cos_off, __global const ELEM* sin_table, long sin_off,
    __global const int* slots, long slots_off, int rot_dim) {
  ATTENTION_ROW(get_group_id(0));
  __local float raw[HEAD_DIM], qs[HEAD_DIM], ks[HEAD_DIM], vs[HEAD_DIM];
  FLASH_LOCALS;
  __local int last;
  const long qkv_row = qkv_off + (long)row * (heads + 2 * kv_heads) * HEAD_DIM, table = (long)row * rot_dim;
  // Every work-group makes the new key too (no barrier under a branch), whether or not it uses or writes it.
  qkv_head(qkv, qkv_row + (long)head * HEAD_DIM, q_norm, q_norm_off, eps, cos_table, cos_off + table, sin_table,
           sin_off + table, HEAD_DIM, rot_dim, raw, p, qs);
  qkv_head(qkv, qkv_row + (long)(heads + keys.kv_head) * HEAD_DIM, k_norm, k_norm_off, eps, cos_table,
           cos_off + table, sin_table, sin_off + table, HEAD_DIM, rot_dim, raw, p, ks);
  const long v_at = qkv_row + (long)(heads + kv_heads + keys.kv_head) * HEAD_DIM;
  for (int i = lid; i < HEAD_DIM; i += ATT_GROUP) vs[i] = LOAD(qkv, v_at + i);
  barrier(CLK_LOCAL_MEM_FENCE);
  const int slot = slots[slots_off + row];
  if (writes_new_key(head, heads, kv_heads, slot)) {
    // The caches are const for the forms that only read them; no work-group of this launch reads this slot.
    const long kv_row = ((long)slot * kv_heads + keys.kv_head) * HEAD_DIM;
    for (int i = lid; i < HEAD_DIM; i += ATT_GROUP) {
      STORE(ks[i], (__global ELEM*)cache_k, cache_k_off + kv_row + i);
      STORE(vs[i], (__global ELEM*)cache_v, cache_v_off + kv_row + i);
    }
  }
  int begin, end;
  split_keys(&keys, get_group_id(1), get_num_groups(1), &begin, &end);
  const int position = positions[positions_off + row];
  const bool uses_new = begin <= position && position < end;  // then position is end - 1, the row's last key
  float acc[DIMS_PER_ITEM];
  for (int i = 0; i < DIMS_PER_ITEM; ++i) acc[i] = 0.0f;
  float max_score = -INFINITY, denom = 0.0f;
  flash_keys(qs, &keys, begin, uses_new ? position : end, cache_k, cache_k_off, cache_v, cache_v_off, block_size,
             kv_heads, scale, p, weights, rows, pieces, acc, &max_score, &denom);
  if (uses_new) {
    float dot = 0.0f, weight;
    for (int i = 0; i < HEAD_DIM; ++i) dot += qs[i] * ks[i];
    const float c = fold_key(dot * scale, &max_score, &denom, &weight);
    for (int d = 0; d < DIMS_PER_ITEM; ++d) {
      const int dim = lid + d * ATT_GROUP;
      if (dim < HEAD_DIM) acc[d] = acc[d] * c + weight * vs[dim];
    }
  }
  end_flash_part(acc, max_score, denom, end > begin, partial, arrivals, out, o, &last);
}

#ifdef TILE_ROWS
// The flash form for prefill (sequences that bring several query rows): one work-group per tile of TILE_ROWS
// query rows of one sequence and a head, so that each key and value read from the cache serves every row of
// the tile, where attention_flash reads them once a row. Keys and values come TILE_KEYS at a time into local
// memory; the scores, running maxima and denominators are float and the weights of the values rounded to the
// dtype, as in attention_flash. programs.cpp sizes the tiles by HEAD_DIM so that local memory stays within
// the 32 KB every OpenCL device has. Items form 8 groups of 8: in the products, group g takes the rows g,
// g + 8, ... and item i of it the keys (or the output dimensions) i, i + 8, ...
#define TILE_LD (HEAD_DIM + 1)  // a padded row, so that the 8 items reading one column hit 8 memory banks
#define P_LD (TILE_KEYS + 1)
#define ITEM_ROWS (TILE_ROWS / 8)
#define ITEM_KEYS (TILE_KEYS / 8)
#define ITEM_DIMS ((HEAD_DIM + 7) / 8)

// Keys (or values) j0 .. j0 + TILE_KEYS - 1 of `keys` into `tile` as floats, those past `last` as zeros.
void load_key_tile(__local float* tile, __global const ELEM* cache, long cache_off, const Keys* keys, int j0,
                   int last, int block_size, int kv_heads) {
  for (int i = get_local_id(0); i < TILE_KEYS * (HEAD_DIM / 8); i += ATT_GROUP) {
    const int k = i / (HEAD_DIM / 8), d = i % (HEAD_DIM / 8) * 8;
    float8 v = 0.0f;
    if (j0 + k <= last) {
      const long at = cache_off + cache_row(keys, j0 + k, block_size, kv_heads) + d;
      if ((at & 7) == 0) {
        v = LOAD8(cache, at);
      } else {
        for (int e = 0; e < 8; ++e) ((float*)&v)[e] = LOAD(cache, at + e);
      }
    }
    vstore8(v, 0, tile + k * TILE_LD + d);
  }
#if HEAD_DIM % 8 != 0
  for (int i = get_local_id(0); i < TILE_KEYS * (HEAD_DIM % 8); i += ATT_GROUP) {
    const int k = i / (HEAD_DIM % 8), d = HEAD_DIM / 8 * 8 + i % (HEAD_DIM % 8);
    tile[k * TILE_LD + d] =
        j0 + k <= last ? LOAD(cache, cache_off + cache_row(keys, j0 + k, block_size, kv_heads) + d) : 0.0f;
  }
#endif
}

__kernel __attribute__((reqd_work_group_size(ATT_GROUP, 1, 1))) void attention_tiles(ATTENTION_ARGS) {
  const int lid = get_local_id(0), head = get_group_id(1), group = lid / 8, lane = lid % 8;
  // Every item reaches every barrier below (PoCL's work-group loops need that): a work-group past the tiles
  // takes a tile of no rows.
  int seq, tile;
  const bool found = find_tile(query_start + query_start_off, num_seqs, TILE_ROWS, get_group_id(0), &seq, &tile);
  const int row0 = found ? query_start[query_start_off + seq] + tile * TILE_ROWS : 0;
  const int rows = found ? min(TILE_ROWS, query_start[query_start_off + seq + 1] - row0) : 0;
  __local float qs[TILE_ROWS * TILE_LD], kv[TILE_KEYS * TILE_LD], p[TILE_ROWS * P_LD];
  __local float rescale[TILE_ROWS];  // each row's factor for what it summed before this tile; at the end, 1 / sum
  __local int first[TILE_ROWS], last[TILE_ROWS];
  const Keys keys = keys_of(query_start + query_start_off, context_lens + context_lens_off,
                            block_tables + block_tables_off, positions + positions_off, num_seqs, heads,
                            kv_heads, max_blocks, window, row0, head);
  if (lid < TILE_ROWS) {
    if (lid < rows) {
      const Keys mine = keys_of(query_start + query_start_off, context_lens + context_lens_off,
                                block_tables + block_tables_off, positions + positions_off, num_seqs, heads,
                                kv_heads, max_blocks, window, row0 + lid, head);
      first[lid] = mine.first;
      last[lid] = mine.last;
    } else {  // past the sequence's rows: no keys
      first[lid] = 1;
      last[lid] = 0;
    }
  }
  for (int i = lid; i < TILE_ROWS * HEAD_DIM; i += ATT_GROUP) {
    const int r = i / HEAD_DIM, d = i % HEAD_DIM;
    qs[r * TILE_LD + d] = r < rows ? LOAD(q, q_off + ((long)(row0 + r) * heads + head) * HEAD_DIM + d) : 0.0f;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  int lo = INT_MAX, hi = -1;
  for (int r = 0; r < rows; ++r) {
    lo = min(lo, first[r]);
    hi = max(hi, last[r]);
  }
  float acc[ITEM_ROWS][ITEM_DIMS];
  for (int i = 0; i < ITEM_ROWS; ++i)
    for (int j = 0; j < ITEM_DIMS; ++j) acc[i][j] = 0.0f;
  float row_max = -INFINITY, row_sum = 0.0f;  // row lid's, for the first TILE_ROWS items
  for (int j0 = lo; j0 <= hi; j0 += TILE_KEYS) {
    load_key_tile(kv, cache_k, cache_k_off, &keys, j0, hi, block_size, kv_heads);
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[ITEM_ROWS][ITEM_KEYS];
    for (int i = 0; i < ITEM_ROWS; ++i)
      for (int j = 0; j < ITEM_KEYS; ++j) s[i][j] = 0.0f;
    for (int d = 0; d < HEAD_DIM; ++d) {
      float a[ITEM_ROWS], b[ITEM_KEYS];
      for (int i = 0; i < ITEM_ROWS; ++i) a[i] = qs[(group + 8 * i) * TILE_LD + d];
      for (int j = 0; j < ITEM_KEYS; ++j) b[j] = kv[(lane + 8 * j) * TILE_LD + d];
      for (int i = 0; i < ITEM_ROWS; ++i)
        for (int j = 0; j < ITEM_KEYS; ++j) s[i][j] += a[i] * b[j];
    }
    for (int i = 0; i < ITEM_ROWS; ++i) {
      const int r = group + 8 * i;
      for (int j = 0; j < ITEM_KEYS; ++j) {
        const int k = lane + 8 * j, key = j0 + k;
        p[r * P_LD + k] = key >= first[r] && key <= last[r] ? s[i][j] * scale : -INFINITY;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The values replace the keys while the first TILE_ROWS items turn their row's scores into weights.
    if (lid < TILE_ROWS) {
      __local float* w = p + lid * P_LD;
      float new_max = row_max;
      for (int k = 0; k < TILE_KEYS; ++k) new_max = fmax(new_max, w[k]);
      float c = 1.0f, tile_sum = 0.0f;
      if (new_max > -INFINITY) {  // else the row has no key yet: nothing to weigh
        c = exp(row_max - new_max);  // 0 on the row's first keys
        for (int k = 0; k < TILE_KEYS; ++k) {
          const float e = exp(w[k] - new_max);  // 0 for the keys the row does not see
          tile_sum += e;
          w[k] = ROUND(e);
        }
        row_max = new_max;
      } else {
        for (int k = 0; k < TILE_KEYS; ++k) w[k] = 0.0f;
      }
      row_sum = row_sum * c + tile_sum;
      rescale[lid] = c;
    }
    load_key_tile(kv, cache_v, cache_v_off, &keys, j0, hi, block_size, kv_heads);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < ITEM_ROWS; ++i) {
      const float c = rescale[group + 8 * i];
      for (int j = 0; j < ITEM_DIMS; ++j) acc[i][j] *= c;
    }
    for (int k = 0; k < TILE_KEYS; ++k) {
      float w[ITEM_ROWS];
      for (int i = 0; i < ITEM_ROWS; ++i) w[i] = p[(group + 8 * i) * P_LD + k];
      for (int j = 0; j < ITEM_DIMS; ++j) {
        const int dim = lane + 8 * j;
        if (dim >= HEAD_DIM) break;
        const float v = kv[k * TILE_LD + dim];
        for (int i = 0; i < ITEM_ROWS; ++i) acc[i][j] += w[i] * v;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // kv, p and rescale are rewritten by the next tile
  }
  if (lid < TILE_ROWS) rescale[lid] = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;  // a row without keys gets zeros
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = 0; i < ITEM_ROWS; ++i) {
    const int r = group + 8 * i;
    if (r >= rows) continue;
    const long o = out_off + ((long)(row0 + r) * heads + head) * HEAD_DIM;
    for (int j = 0; j < ITEM_DIMS; ++j) {
      const int dim = lane + 8 * j;
      if (dim < HEAD_DIM) STORE(acc[i][j] * rescale[r], out, o + dim);
    }
  }
}
#endif

#ifdef ATT_SUB_GROUP
#if !defined(cl_intel_subgroups) || !defined(cl_intel_subgroups_short) || \
    !defined(cl_intel_required_subgroup_size)
#error "attention_subgroup needs cl_intel_subgroups, cl_intel_subgroups_short and cl_intel_required_subgroup_size"
#endif
#define SG ATT_SUB_GROUP
#define DIMS_PER_LANE (HEAD_DIM / SG)
// The keys begin..end-1 of `keys` folded into the running state of attention_subgroup's lanes (acc: this lane's
// dimensions lane, lane + SG, ... of the unnormalised output; the maximum score; the denominator). Keys come SG
// at a time and lane i keeps the score of key i, so a chunk's maximum, its weights' sum and each weight's
// broadcast are sub-group operations.
void subgroup_keys(const float* qv, const Keys* keys, int begin, int end, __global const ELEM* cache_k,
                   long cache_k_off, __global const ELEM* cache_v, long cache_v_off, int block_size, int kv_heads,
                   float scale, float* acc, float* max_score, float* denom) {
  const int lane = get_sub_group_local_id();
  for (int j0 = begin; j0 < end; j0 += SG) {
    const int count = min(SG, end - j0);
    float mine = -INFINITY;  // the score of key j0 + lane
    for (int i = 0; i < count; ++i) {
      __global const ELEM* k = cache_k + cache_k_off + cache_row(keys, j0 + i, block_size, kv_heads);
      float d = 0.0f;
      for (int b = 0; b < DIMS_PER_LANE; ++b) d += qv[b] * BLOCK_LOAD(k, b * SG);
      const float score = sub_group_reduce_add(d) * scale;
      if (lane == i) mine = score;
    }
    const float new_max = fmax(*max_score, sub_group_reduce_max(mine));
    const float p = lane < count ? exp(mine - new_max) : 0.0f;
    const float c = exp(*max_score - new_max);  // 0 on the first chunk
    *denom = *denom * c + sub_group_reduce_add(p);
    // The weights multiply the values rounded to the dtype, as in attention_flash.
    const float weight = ROUND(p);
    for (int b = 0; b < DIMS_PER_LANE; ++b) acc[b] *= c;
    for (int i = 0; i < count; ++i) {
      const float w = sub_group_broadcast(weight, i);
      __global const ELEM* v = cache_v + cache_v_off + cache_row(keys, j0 + i, block_size, kv_heads);
      for (int b = 0; b < DIMS_PER_LANE; ++b) acc[b] += w * BLOCK_LOAD(v, b * SG);
    }
    *max_score = new_max;
  }
}

// The end of an attention_subgroup work-group's part of a (row, head)'s keys, as end_flash_part's.
void end_subgroup_part(const float* acc, float max_score, float denom, bool has_keys, __global float* partial,
                       __global int* arrivals, __global ELEM* out, long o) {
  const int lane = get_sub_group_local_id(), group = get_group_id(0);
  const int split = get_group_id(1), splits = get_num_groups(1);
  __global float* states = partial + (long)group * splits * (HEAD_DIM + 2);
  finish_part(acc, DIMS_PER_LANE, lane, SG, lane == 0, max_score, denom, has_keys, split, splits, states, out, o);
  int last = 0;
  if (splits > 1) {
    mem_fence(CLK_GLOBAL_MEM_FENCE);  // each lane's state reaches global memory before the part arrives
    sub_group_barrier(CLK_GLOBAL_MEM_FENCE);
    if (lane == 0) last = arrive_last(arrivals + group, splits);
    last = sub_group_broadcast(last, 0);
  }
  if (last) {  // the last part merges them all
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    combine_splits(states, splits, lane, SG, out, o);
  }
}

// The flash form on Intel GPUs: a work-group is one sub-group of SG lanes for a (row, head) and part of its keys,
// as attention_flash's work-groups are. Lane l holds dimensions l, l + SG, ... of q and of the output; a key or
// value row comes in block reads of SG consecutive elements, and a score is a sub-group sum (subgroup_keys): no
// local memory, and no barrier but the parts' arrival. The host launches it where HEAD_DIM is a multiple of SG
// and both caches start 16-byte aligned (every row does then).
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) __attribute__((intel_reqd_sub_group_size(SG))) void
attention_subgroup(ATTENTION_ARGS, __global float* partial, __global int* arrivals) {
  ATTENTION_ROW(get_group_id(0));  // lid: the lane, a work-group being one sub-group
  float qv[DIMS_PER_LANE], acc[DIMS_PER_LANE];
  for (int b = 0; b < DIMS_PER_LANE; ++b) {
    qv[b] = LOAD(q, q_off + ((long)row * heads + head) * HEAD_DIM + b * SG + lid);
    acc[b] = 0.0f;
  }
  int begin, end;
  split_keys(&keys, get_group_id(1), get_num_groups(1), &begin, &end);
  float max_score = -INFINITY, denom = 0.0f;
  subgroup_keys(qv, &keys, begin, end, cache_k, cache_k_off, cache_v, cache_v_off, block_size, kv_heads, scale, acc,
                &max_score, &denom);
  end_subgroup_part(acc, max_score, denom, end > begin, partial, arrivals, out, o);
}

// A q or k head of the fused projection made as qkv_head makes it, this lane's dimensions lane, lane + SG, ...
// into v: the norm's sum is a sub-group sum, and a dimension's rotary partner is in the same lane (the host
// launches this where rot_dim / 2 is a multiple of SG).
void lane_head(__global const ELEM* qkv, long at, __global const ELEM* norm, long norm_off, float eps,
               __global const ELEM* cos_table, long cos_at, __global const ELEM* sin_table, long sin_at, int rot_dim,
               float* v) {
  const int lane = get_sub_group_local_id();
  float squares = 0.0f;
  for (int b = 0; b < DIMS_PER_LANE; ++b) {
    v[b] = LOAD(qkv, at + b * SG + lane);
    squares += v[b] * v[b];
  }
  const float inv = 1.0f / sqrt(sub_group_reduce_add(squares) / (float)HEAD_DIM + eps);
  if (norm)
    for (int b = 0; b < DIMS_PER_LANE; ++b) v[b] = ROUND(LOAD(norm, norm_off + b * SG + lane) * ROUND(v[b] * inv));
  const int pairs = rot_dim / 2, shift = pairs / SG;
  float rotated[DIMS_PER_LANE];
  for (int b = 0; b < DIMS_PER_LANE; ++b) {
    const int d = b * SG + lane;
    const bool first = d < pairs;
    rotated[b] = d < rot_dim ? ROUND(rope_element(v[b], v[first ? b + shift : b - shift], LOAD(cos_table, cos_at + d),
                                                  LOAD(sin_table, sin_at + d), first))
                             : v[b];
  }
  for (int b = 0; b < DIMS_PER_LANE; ++b) v[b] = rotated[b];
}

// op::QkvAttention on Intel sub-groups: attention_subgroup whose query head, and the row's new key and value, come
// from the fused projection (lane_head), as qkv_attention_flash does for the portable form.
__kernel __attribute__((reqd_work_group_size(SG, 1, 1))) __attribute__((intel_reqd_sub_group_size(SG))) void
qkv_attention_subgroup(__global const ELEM* qkv, long qkv_off, ATTENTION_CACHE_ARGS, __global float* partial,
                       __global int* arrivals, __global const ELEM* q_norm, long q_norm_off,
                       __global const ELEM* k_norm, long k_norm_off, float eps, __global const ELEM* cos_table,
                       long cos_off, __global const ELEM* sin_table, long sin_off, __global const int* slots,
                       long slots_off, int rot_dim) {
  ATTENTION_ROW(get_group_id(0));  // lid: the lane, a work-group being one sub-group
  const long qkv_row = qkv_off + (long)row * (heads + 2 * kv_heads) * HEAD_DIM, table = (long)row * rot_dim;
  float qv[DIMS_PER_LANE], kv[DIMS_PER_LANE], vv[DIMS_PER_LANE], acc[DIMS_PER_LANE];
  lane_head(qkv, qkv_row + (long)head * HEAD_DIM, q_norm, q_norm_off, eps, cos_table, cos_off + table, sin_table,
            sin_off + table, rot_dim, qv);
  lane_head(qkv, qkv_row + (long)(heads + keys.kv_head) * HEAD_DIM, k_norm, k_norm_off, eps, cos_table,
            cos_off + table, sin_table, sin_off + table, rot_dim, kv);
  const long v_at = qkv_row + (long)(heads + kv_heads + keys.kv_head) * HEAD_DIM;
  for (int b = 0; b < DIMS_PER_LANE; ++b) {
    vv[b] = LOAD(qkv, v_at + b * SG + lid);
    acc[b] = 0.0f;
  }
  const int slot = slots[slots_off + row];
  if (writes_new_key(head, heads, kv_heads, slot)) {
    // The caches are const for the forms that only read them; no work-group of this launch reads this slot.
    const long kv_row = ((long)slot * kv_heads + keys.kv_head) * HEAD_DIM;
    for (int b = 0; b < DIMS_PER_LANE; ++b) {
      STORE(kv[b], (__global ELEM*)cache_k, cache_k_off + kv_row + b * SG + lid);
      STORE(vv[b], (__global ELEM*)cache_v, cache_v_off + kv_row + b * SG + lid);
    }
  }
  int begin, end;
  split_keys(&keys, get_group_id(1), get_num_groups(1), &begin, &end);
  const int position = positions[positions_off + row];
  const bool uses_new = begin <= position && position < end;  // then position is end - 1, the row's last key
  float max_score = -INFINITY, denom = 0.0f;
  subgroup_keys(qv, &keys, begin, uses_new ? position : end, cache_k, cache_k_off, cache_v, cache_v_off,
                block_size, kv_heads, scale, acc, &max_score, &denom);
  if (uses_new) {
    float d = 0.0f, weight;
    for (int b = 0; b < DIMS_PER_LANE; ++b) d += qv[b] * kv[b];
    const float c = fold_key(sub_group_reduce_add(d) * scale, &max_score, &denom, &weight);
    for (int b = 0; b < DIMS_PER_LANE; ++b) acc[b] = acc[b] * c + weight * vv[b];
  }
  end_subgroup_part(acc, max_score, denom, end > begin, partial, arrivals, out, o);
}
#undef DIMS_PER_LANE
#undef SG
#endif

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
