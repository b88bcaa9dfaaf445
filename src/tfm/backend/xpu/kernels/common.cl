// Helpers every program of the xpu kernels starts with (the host prepends this file to each source).
// Kernels take each buffer with an element offset (OpenCL buffers cannot be offset like pointers) and are
// launched on global sizes rounded up to whole work-groups, so they check their bounds.

// Element storage. A program is built for one dtype, named by the build option DTYPE (f32, bf16 or f16);
// kernels compute in float and touch their tensors only through these macros:
//   ELEM            the type a buffer element is stored as
//   LOAD(p, i)      element i of p as a float
//   STORE(v, p, i)  float v into element i of p, rounded to nearest even
//   ROUND(v)        v rounded to the dtype and back: where torch stores an intermediate result in the dtype
// The *_AS forms name the dtype, for a kernel that reads one dtype and writes another (cast).
// bfloat16 is handled as the top half of a float's bits, so no extension is needed; float16 goes through
// vload_half / vstore_half_rte, which are core OpenCL C (cl_khr_fp16, which NVIDIA lacks, is not needed to
// hold half values, only to compute with them).
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

float bf16_to_float(ushort b) {
  return as_float((uint)b << 16);
}

// Round to nearest even on the discarded half; a NaN stays a (quiet) NaN instead of rounding to infinity.
ushort float_to_bf16(float f) {
  uint bits = as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (ushort)((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (ushort)(bits >> 16);
}

// Without cl_khr_fp16 a half cannot be a variable, only the target of a pointer: the rounding goes through a
// ushort's storage.
float round_to_f16(float v) {
  ushort bits;
  vstore_half_rte(v, 0, (__private half*)&bits);
  return vload_half(0, (__private const half*)&bits);
}

#define f32_ELEM float
#define bf16_ELEM ushort
#define f16_ELEM half
#define f32_LOAD(p, i) ((p)[i])
#define bf16_LOAD(p, i) bf16_to_float((p)[i])
#define f16_LOAD(p, i) vload_half((i), (p))
#define f32_STORE(v, p, i) ((p)[i] = (v))
#define bf16_STORE(v, p, i) ((p)[i] = float_to_bf16(v))
#define f16_STORE(v, p, i) vstore_half_rte((v), (i), (p))
#define f32_ROUND(v) (v)
#define bf16_ROUND(v) bf16_to_float(float_to_bf16(v))
#define f16_ROUND(v) round_to_f16(v)

// Eight consecutive elements from element i of p as a float8, in one 16-byte load for the 2-byte dtypes (two for
// float32). The address must be aligned to the load: i and p's element offset multiples of 8.
float8 bf16x8_to_float(uint4 u) {
  const uint4 lo = u << 16, hi = u & 0xffff0000u;  // element 2j is the low half of word j
  return (float8)(as_float(lo.s0), as_float(hi.s0), as_float(lo.s1), as_float(hi.s1), as_float(lo.s2),
                  as_float(hi.s2), as_float(lo.s3), as_float(hi.s3));
}
#define f32_LOAD8(p, i) (*(__global const float8*)((p) + (i)))
#define bf16_LOAD8(p, i) bf16x8_to_float(*(__global const uint4*)((p) + (i)))
#define f16_LOAD8(p, i) vload_half8((i) / 8, (p))  // no arithmetic on a half pointer without cl_khr_fp16

float sum8(float8 v) {
  const float4 s = v.lo + v.hi;
  return (s.x + s.y) + (s.z + s.w);
}

#define ELEM_AS(dtype) CAT(dtype, _ELEM)
#define LOAD_AS(dtype, p, i) CAT(dtype, _LOAD)(p, i)
#define STORE_AS(dtype, v, p, i) CAT(dtype, _STORE)(v, p, i)
#define ELEM ELEM_AS(DTYPE)
#define LOAD(p, i) LOAD_AS(DTYPE, p, i)
#define STORE(v, p, i) STORE_AS(DTYPE, v, p, i)
#define ROUND(v) CAT(DTYPE, _ROUND)(v)
#define LOAD8(p, i) CAT(DTYPE, _LOAD8)(p, i)

// The sum or maximum of one value per item over the whole work-group, returned to every item. `scratch` holds
// one float per item; the work-group size is a power of two. Every item of the group must call it.
float group_sum(__local float* scratch, float value) {
  const int lid = get_local_id(0), n = get_local_size(0);
  scratch[lid] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = n / 2; stride > 0; stride /= 2) {
    if (lid < stride) scratch[lid] += scratch[lid + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // the scratch may be reused right after
  return total;
}

float group_max(__local float* scratch, float value) {
  const int lid = get_local_id(0), n = get_local_size(0);
  scratch[lid] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = n / 2; stride > 0; stride /= 2) {
    if (lid < stride) scratch[lid] = fmax(scratch[lid], scratch[lid + stride]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

// Counts one more of the `parts` parts of some work (a decode attention's row and head, an argmax's row) in at
// `counter`: true for the last to arrive, which then merges the parts and which sets the counter back to zero
// for the next launch. One item a part calls it, after its part's results are visible to other work-groups.
bool arrive_last(__global int* counter, int parts) {
  const bool last = atomic_inc(counter) == parts - 1;
  if (last) *counter = 0;
  return last;
}

// The sequence holding row `row` of a ragged batch whose sequence s is rows [query_start[s],
// query_start[s + 1]): the last s with query_start[s] <= row (an empty sequence is skipped).
int sequence_of(__global const int* query_start, int num_seqs, int row) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (query_start[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The tile of `tile_rows` rows a work-group takes: `index` over every sequence's tiles in order, the sequence
// and its tile's index in it. False past them (a launch is sized for the worst case, a partial tile per
// sequence).
bool find_tile(__global const int* query_start, int num_seqs, int tile_rows, int index, int* seq, int* tile) {
  for (*seq = 0; *seq < num_seqs; ++*seq) {
    const int tiles = (query_start[*seq + 1] - query_start[*seq] + tile_rows - 1) / tile_rows;
    if (index < tiles) {
      *tile = index;
      return true;
    }
    index -= tiles;
  }
  return false;
}

#ifdef DTYPE  // the programs of one dtype (copy's moves words of any)
// Element i of a half-split rotated head, from x = head[i] and its partner head[i +- rot_dim / 2] and the cos and
// sin at i: each product and the sum rounded, as rope_ rounds; the first half subtracts the partner's product.
float rope_element(float x, float partner, float c, float s, bool first_half) {
  return ROUND(x * c) + ROUND((first_half ? -partner : partner) * s);
}

// The most dimensions of a head one item holds in qkv_head: the attention programs' (HEAD_DIM a build option,
// ATT_GROUP items a head) and the pointwise program's (heads of up to MAX_HEAD_DIM, RMS_GROUP items).
#if defined(HEAD_DIM) && defined(ATT_GROUP)
#define HEAD_ITEM_DIMS ((HEAD_DIM + ATT_GROUP - 1) / ATT_GROUP)
#elif defined(MAX_HEAD_DIM) && defined(RMS_GROUP)
#define HEAD_ITEM_DIMS (MAX_HEAD_DIM / RMS_GROUP)
#endif

#ifdef HEAD_ITEM_DIMS
// A q or k head of the fused projection made as qkv_rope_cache makes it (op_set.h), as floats that hold the
// dtype's values: the `dim` elements at `at` of qkv (at most HEAD_ITEM_DIMS an item) are normalised with `norm`
// (when given; rounded as rms_norm rounds) into `raw`, then rotated into `out` by the rot_dim cos and sin values
// at cos_at and sin_at (rounded as rope_ rounds; dimensions past rot_dim as they are). Every load is issued
// before the norm's sum, whose barriers they would otherwise wait behind one after another. Every item of the
// work-group calls it: it holds barriers. `scratch` holds a float an item.
void qkv_head(__global const ELEM* qkv, long at, __global const ELEM* norm, long norm_off, float eps,
              __global const ELEM* cos_table, long cos_at, __global const ELEM* sin_table, long sin_at, int dim,
              int rot_dim, __local float* raw, __local float* scratch, __local float* out) {
  const int lid = get_local_id(0), items = get_local_size(0);
  float x[HEAD_ITEM_DIMS], weight[HEAD_ITEM_DIMS], c[HEAD_ITEM_DIMS], s[HEAD_ITEM_DIMS];
  float sum = 0.0f;
  for (int j = 0; j < HEAD_ITEM_DIMS; ++j) {
    const int i = lid + j * items;
    x[j] = i < dim ? LOAD(qkv, at + i) : 0.0f;
    weight[j] = norm && i < dim ? LOAD(norm, norm_off + i) : 1.0f;
    c[j] = i < rot_dim ? LOAD(cos_table, cos_at + i) : 0.0f;
    s[j] = i < rot_dim ? LOAD(sin_table, sin_at + i) : 0.0f;
    sum += x[j] * x[j];
  }
  const float inv = 1.0f / sqrt(group_sum(scratch, sum) / (float)dim + eps);
  for (int j = 0; j < HEAD_ITEM_DIMS; ++j) {
    const int i = lid + j * items;
    if (i < dim) raw[i] = norm ? ROUND(weight[j] * ROUND(x[j] * inv)) : x[j];
  }
  barrier(CLK_LOCAL_MEM_FENCE);  // the rotation reads the other half of the head
  const int pairs = rot_dim / 2;
  for (int j = 0; j < HEAD_ITEM_DIMS; ++j) {
    const int i = lid + j * items;
    const bool first = i < pairs;
    if (i >= dim) continue;
    out[i] = i < rot_dim ? ROUND(rope_element(raw[i], raw[first ? i + pairs : i - pairs], c[j], s[j], first)) : raw[i];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
#endif
#endif

// The host's counter-based random stream (backend/sampling_math.h), bit for bit.
ulong splitmix64(ulong z) {
  z += 0x9E3779B97F4A7C15ul;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ul;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBul;
  return z ^ (z >> 31);
}

#if defined(cl_intel_subgroups) && defined(cl_intel_subgroups_short)
float half_bits_to_float(ushort bits) {
  return vload_half(0, (__private const half*)&bits);
}

// Element k + lane of p, for each lane of the sub-group, as a float: one block read (the Intel variants; p + k
// 16-byte aligned, which their hosts check).
#define f32_BLOCK_LOAD(p, k) as_float(intel_sub_group_block_read((const __global uint*)((p) + (k))))
#define bf16_BLOCK_LOAD(p, k) bf16_to_float(intel_sub_group_block_read_us((const __global ushort*)((p) + (k))))
#define f16_BLOCK_LOAD(p, k) half_bits_to_float(intel_sub_group_block_read_us((const __global ushort*)((p) + (k))))
#define BLOCK_LOAD(p, k) CAT(DTYPE, _BLOCK_LOAD)(p, k)
#endif
