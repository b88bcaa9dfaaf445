// Row copies: embedding, gather_rows, kv_cache_write, split_columns, concat_columns (op_set.h gives the
// semantics). They move elements without looking at them, as unsigned integers of the element's size (the build
// option WORD: uint or ushort), so bfloat16 and float16 share one program. Two-dimensional kernels run over
// (column, row).

// out[i, :] = x[rows[i], :], skipping negative rows; also the embedding lookup (x the table, rows the token
// ids).
__kernel void gather_rows(__global const WORD* x, long x_off, __global const int* rows, long rows_off,
                          __global WORD* out, long out_off, int width, int count) {
  const int c = get_global_id(0), i = get_global_id(1);
  if (c >= width || i >= count) return;
  const long row = rows[rows_off + i];
  if (row < 0) return;
  out[out_off + (long)i * width + c] = x[x_off + row * width + c];
}

// cache_k[slots[t], :] = k[t, :] and cache_v[slots[t], :] = v[t, :], rows of kv_dim elements.
__kernel void kv_cache_write(__global const WORD* k, long k_off, __global const WORD* v, long v_off,
                             __global const int* slots, long slots_off, __global WORD* cache_k,
                             long cache_k_off, __global WORD* cache_v, long cache_v_off, int kv_dim,
                             int count) {
  const int c = get_global_id(0), t = get_global_id(1);
  if (c >= kv_dim || t >= count) return;
  const long slot = slots[slots_off + t];
  if (slot < 0) return;  // a padding row
  cache_k[cache_k_off + slot * kv_dim + c] = k[k_off + (long)t * kv_dim + c];
  cache_v[cache_v_off + slot * kv_dim + c] = v[v_off + (long)t * kv_dim + c];
}

// out[t, out_first + c] = x[t, x_first + c] for c < width, x of x_width columns and out of out_width: a block
// of split_columns or concat_columns.
__kernel void copy_columns(__global const WORD* x, long x_off, int x_width, int x_first, __global WORD* out,
                           long out_off, int out_width, int out_first, int width, int count) {
  const int c = get_global_id(0), t = get_global_id(1);
  if (c >= width || t >= count) return;
  out[out_off + (long)t * out_width + out_first + c] = x[x_off + (long)t * x_width + x_first + c];
}
