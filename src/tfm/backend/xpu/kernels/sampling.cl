// op::SampleRows (op_set.h states the rules and their order; backend/sampling_math.h the formulas repeated here,
// which must round as the host's do): one work-group of SAMPLE_GROUP items per row, no sort. Penalized tokens
// are marked in a bitmap (a global scratch row: V bits exceed some devices' local memory), so that a pass over
// the row skips them and takes their penalized values from the row's entries instead. Thresholds are found
// digit by digit over order_key(value): four passes of 256-bin histograms each for top-k (counts) and top-p
// (fixed-point masses, 64-bit sums built from 32-bit local atomics, so the sums do not depend on the order of
// the additions). The draw is a reduction: the largest race score.
//
// Where the rows leave the device idle, a row with a top-k of at most MAX_SPLIT_TOP_K is first cut slice by
// slice (sample_candidates, a work-group a slice): each keeps its slice's top-k and the tokens tied with the last
// of them, up to MAX_CANDIDATES. Every token the row's top-k keeps is a candidate of its slice (a slice's k-th
// largest value is at most the row's), so sample_rows then applies the rules to the candidates alone and comes
// to the same token; a slice with more ties than it holds leaves sample_rows the whole row. A NaN is kept as a
// candidate too (+inf is above any cut), so that sample_rows finds a row without a distribution as it does whole.
#define SETTINGS_WORDS 9
#define BINS 256

uint order_key(float v) {
  const uint bits = as_uint(v);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

float from_order_key(uint key) {
  return as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

float race_score(float y, ulong key, int i) {
  const float u = ((float)(splitmix64(key ^ (ulong)i) >> 40) + 0.5f) * 0x1.0p-24f;
  return y - log(-log(u));
}

ulong fixed_mass(float weight) {
  return (ulong)(weight * 0x1.0p40f);
}

// A walk over tokens lo .. hi - 1 of one row and then the row's penalty entries for those tokens, or over a split
// row's candidates, as every pass reads it.
typedef struct {
  __global const ELEM* x;       // the row's logits
  __global const int* entries;  // (token, amount bits) pairs of the whole batch
  __global const uint* marks;   // the row's bitmap of penalized tokens (bit t), or null
  int lo, hi, begin, end;
  float temperature, repetition_penalty;
  bool greedy;
  // Instead of the row: slice s's (value bits, token) pairs from candidates[s * MAX_CANDIDATES], walk indices
  // starts[s] on; null for the row itself.
  __global const int2* candidates;
  __local const int* starts;
  int splits;
} Row;

// Row `row` of the batch as its settings describe it, over all of its tokens.
Row row_of(__global const ELEM* logits, __global const int* s, __global const int* entries, int num_entries,
           int row, int V) {
  Row r;
  r.x = logits + (long)row * V;
  r.entries = entries;
  r.marks = 0;
  r.lo = 0;
  r.hi = V;
  r.begin = clamp(s[7], 0, num_entries);
  r.end = clamp(s[8], r.begin, num_entries);
  r.temperature = as_float(s[0]);
  r.repetition_penalty = as_float(s[4]);
  r.greedy = r.temperature <= 0;
  r.candidates = 0;
  r.starts = 0;
  r.splits = 0;
  return r;
}

// Whether a split row is cut to candidates first: sampled, with a top-k below V of at most MAX_SPLIT_TOP_K.
bool takes_candidates(const Row* r, int top_k, int V) {
  return !r->greedy && top_k > 0 && top_k <= MAX_SPLIT_TOP_K && top_k < V;
}

// Marks the row's penalized tokens among lo .. hi - 1 (lo a multiple of 32, so that slices share no word) in
// `marks` and has the walk skip them. Every item must call it.
void mark_penalized(Row* r, __global uint* marks) {
  const bool penalized = r->end > r->begin;
  for (int w = r->lo / 32 + get_local_id(0); penalized && w < (r->hi + 31) / 32; w += SAMPLE_GROUP) marks[w] = 0;
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (int j = r->begin + get_local_id(0); j < r->end; j += SAMPLE_GROUP) {
    const int t = r->entries[2 * j];
    if (t >= r->lo && t < r->hi) atomic_or(&marks[t >> 5], 1u << (t & 31));
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  r->marks = penalized ? marks : 0;
}

// Element i of the walk: token *token with value *y as the rules see it (penalties, then the temperature);
// false for a marked token (its entry carries it) or an entry outside lo .. hi - 1.
bool token_at(const Row* r, int i, int* token, float* y) {
  if (r->candidates) {
    int lo = 0, hi = r->splits - 1;  // the last slice s with starts[s] <= i
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (r->starts[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int2 c = r->candidates[lo * MAX_CANDIDATES + i - r->starts[lo]];
    *y = as_float(c.x);
    *token = c.y;
    return true;
  }
  float v;
  const int n = r->hi - r->lo;
  if (i < n) {
    const int t = r->lo + i;
    if (r->marks && (r->marks[t >> 5] >> (t & 31) & 1u)) return false;
    *token = t;
    v = LOAD(r->x, t);
  } else {
    const int j = r->begin + i - n, t = r->entries[2 * j];
    if (t < r->lo || t >= r->hi) return false;
    *token = t;
    v = LOAD(r->x, t) - as_float(r->entries[2 * j + 1]);
    if (r->repetition_penalty != 1.0f) v = v < 0 ? v * r->repetition_penalty : v / r->repetition_penalty;
  }
  *y = r->greedy ? v : v / r->temperature;
  return true;
}

int walk_length(const Row* r) {
  return r->candidates ? r->starts[r->splits] : r->hi - r->lo + r->end - r->begin;
}

// Whether any item's flag is set, returned to every item.
bool group_any(__local float* scratch, bool flag) {
  const int lid = get_local_id(0);
  scratch[lid] = flag;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = SAMPLE_GROUP / 2; stride > 0; stride /= 2) {
    if (lid < stride) scratch[lid] = fmax(scratch[lid], scratch[lid + stride]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const bool any = scratch[0] != 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  return any;
}

// The best (value, index) of the group, returned to every item: the larger value, then the smaller index; an
// index below 0 is none.
int group_best(__local float* values, __local int* indices, float value, int index) {
  const int lid = get_local_id(0);
  values[lid] = value;
  indices[lid] = index;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = SAMPLE_GROUP / 2; stride > 0; stride /= 2) {
    if (lid < stride) {
      const int o = lid + stride;
      const bool better = indices[o] >= 0 && (indices[lid] < 0 || values[o] > values[lid] ||
                                              (values[o] == values[lid] && indices[o] < indices[lid]));
      if (better) {
        values[lid] = values[o];
        indices[lid] = indices[o];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const int best = indices[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return best;
}

// The threshold of top-k (weighted false: every token weighs 1, target k) or top-p (weighted: tokens at or above
// `floor` weigh fixed_mass(exp(y - top)), target top_p times their total): the largest value whose tokens at or
// above it weigh at least the target, else the smallest weighed value; `floor` itself when not `active`.
// `state` holds the chosen key's prefix. Every item reaches every barrier, active or not (PoCL's work-group
// loops need that).
float select_cut(const Row* r, bool active, bool weighted, float floor, float top, ulong k, float top_p,
                 __local uint* counts, __local uint* mass_low, __local uint* mass_high, __local uint* state) {
  const int lid = get_local_id(0), length = active ? walk_length(r) : 0;
  uint prefix = 0, mask = 0;
  ulong above = 0, target = k;  // above: the weight of tokens above the prefix's range (item 0 keeps it)
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = lid; b < BINS; b += SAMPLE_GROUP) counts[b] = mass_low[b] = mass_high[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < length; i += SAMPLE_GROUP) {
      int token;
      float y;
      if (!token_at(r, i, &token, &y) || (weighted && !(y >= floor && y != -INFINITY))) continue;
      const uint key = order_key(y);
      if ((key & mask) != prefix) continue;
      const uint bin = key >> shift & (BINS - 1);
      atomic_inc(&counts[bin]);
      if (weighted) {
        const ulong m = fixed_mass(exp(y - top));
        const uint low = (uint)m, old = atomic_add(&mass_low[bin], low);
        atomic_add(&mass_high[bin], (uint)(m >> 32) + (old + low < old ? 1u : 0u));
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0 && active) {
      if (weighted && shift == 24) {
        ulong total = 0;
        for (int b = 0; b < BINS; ++b) total += (ulong)mass_high[b] << 32 | mass_low[b];
        target = (ulong)(top_p * (float)total);
      }
      int chosen = -1, lowest = 0;
      ulong above_lowest = above;
      for (int b = BINS - 1; b >= 0; --b) {
        if (counts[b] == 0) continue;
        const ulong w = weighted ? (ulong)mass_high[b] << 32 | mass_low[b] : counts[b];
        if (above + w >= target) {
          chosen = b;
          break;
        }
        lowest = b;
        above_lowest = above;
        above += w;
      }
      if (chosen < 0) {  // the target is past the total: the smallest value, the tokens above it weighed
        chosen = lowest;
        above = above_lowest;
      }
      state[0] = prefix | (uint)chosen << shift;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    prefix = state[0];
    mask |= (uint)(BINS - 1) << shift;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return active ? from_order_key(prefix) : floor;
}

// Slice get_group_id(0) of row get_group_id(1) (tokens slice * split on): its candidates for sample_rows, and in
// counts[row * splits + split] how many (-1: more than MAX_CANDIDATES). Rows that do not take candidates are
// left alone.
__kernel __attribute__((reqd_work_group_size(SAMPLE_GROUP, 1, 1))) void sample_candidates(
    __global const ELEM* logits, long logits_off, __global const int* settings, long settings_off,
    __global const int* entries, long entries_off, int num_entries, __global uint* marks, __global int2* candidates,
    long candidates_off, __global int* taken_counts, long taken_counts_off, int V, int slice) {
  __local uint counts[BINS], mass_low[BINS], mass_high[BINS], state[1];
  __local int taken;
  const int lid = get_local_id(0), split = get_group_id(0), splits = get_num_groups(0), row = get_group_id(1);
  __global const int* s = settings + settings_off + (long)row * SETTINGS_WORDS;
  Row r = row_of(logits + logits_off, s, entries + entries_off, num_entries, row, V);
  // Every item reaches every barrier below, whatever the row needs (PoCL's work-group loops need that): a row
  // that takes no candidates walks nothing.
  const bool takes = takes_candidates(&r, s[1], V);
  r.lo = takes ? split * slice : 0;
  r.hi = takes ? min(V, r.lo + slice) : 0;
  mark_penalized(&r, marks + (long)row * ((V + 31) / 32));
  const float floor = select_cut(&r, takes, false, -INFINITY, 0, (ulong)s[1], 0, counts, mass_low, mass_high, state);
  if (lid == 0) taken = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  __global int2* mine = candidates + candidates_off + ((long)row * splits + split) * MAX_CANDIDATES;
  for (int i = lid; i < walk_length(&r); i += SAMPLE_GROUP) {
    int token;
    float y;
    if (!token_at(&r, i, &token, &y) || !(y >= floor || isnan(y))) continue;
    const int at = atomic_inc(&taken);
    if (at < MAX_CANDIDATES) mine[at] = (int2)(as_int(y), token);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0 && takes) taken_counts[taken_counts_off + (long)row * splits + split] = taken <= MAX_CANDIDATES ? taken : -1;
}

// Row get_group_id(0): from the row itself, or with `splits` above 1 from the candidates sample_candidates
// left where the row takes them and no slice overflowed.
__kernel __attribute__((reqd_work_group_size(SAMPLE_GROUP, 1, 1))) void sample_rows(
    __global const ELEM* logits, long logits_off, __global const int* settings, long settings_off,
    __global const int* entries, long entries_off, int num_entries, __global uint* marks,
    __global const int2* candidates, long candidates_off, __global const int* taken_counts, long taken_counts_off,
    int splits, __global int* ids, long ids_off, int V) {
  __local float values[SAMPLE_GROUP];
  __local int indices[SAMPLE_GROUP];
  __local uint counts[BINS], mass_low[BINS], mass_high[BINS], state[1];
  __local int starts[MAX_SPLITS + 1], whole[1];
  const int lid = get_local_id(0), row = get_group_id(0);
  __global const int* s = settings + settings_off + (long)row * SETTINGS_WORDS;
  Row r = row_of(logits + logits_off, s, entries + entries_off, num_entries, row, V);
  const int top_k = s[1];
  const float top_p = as_float(s[2]), min_p = as_float(s[3]);
  const ulong key = (ulong)(uint)s[6] << 32 | (uint)s[5];

  // Every item reaches every barrier below, whatever the row needs (PoCL's work-group loops need that).
  // The candidates serve unless the row takes none or a slice overflowed.
  if (lid == 0) {
    whole[0] = !(splits > 1 && takes_candidates(&r, top_k, V));
    int total = 0;
    for (int i = 0; !whole[0] && i < splits; ++i) {
      const int n = taken_counts[taken_counts_off + (long)row * splits + i];
      starts[i] = total;
      total += n;
      whole[0] = n < 0;
    }
    starts[splits] = total;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  mark_penalized(&r, marks + (long)row * ((V + 31) / 32));
  if (!whole[0]) {
    r.candidates = candidates + candidates_off + (long)row * splits * MAX_CANDIDATES;
    r.starts = starts;
    r.splits = splits;
  }

  // The largest value (the first of equal ones), and whether the row has a distribution at all.
  float best = -INFINITY;
  int best_token = -1;
  bool invalid = false;
  for (int i = lid; i < walk_length(&r); i += SAMPLE_GROUP) {
    int token;
    float y;
    if (!token_at(&r, i, &token, &y)) continue;
    invalid |= isnan(y) || y == INFINITY;
    if (best_token < 0 || y > best || (y == best && token < best_token)) {
      best = y;
      best_token = token;
    }
  }
  invalid = group_any(values, invalid);
  best_token = group_best(values, indices, best, best_token);
  const float top = values[0];  // group_best left the winner's value in place
  const bool valid = !invalid && top != -INFINITY, sampling = valid && !r.greedy;

  float floor = select_cut(&r, sampling && top_k > 0 && top_k < V, false, -INFINITY, top, (ulong)top_k, 0,
                           counts, mass_low, mass_high, state);
  floor = select_cut(&r, sampling && top_p < 1, true, floor, top, 0, top_p, counts, mass_low, mass_high, state);
  float score = -INFINITY;
  int chosen = -1;
  for (int i = lid; sampling && i < walk_length(&r); i += SAMPLE_GROUP) {
    int token;
    float y;
    if (!token_at(&r, i, &token, &y) || !(y >= floor && y != -INFINITY)) continue;
    if (min_p > 0 && !(exp(y - top) >= min_p)) continue;
    const float race = race_score(y, key, token);
    if (chosen < 0 || race > score || (race == score && token < chosen)) {
      score = race;
      chosen = token;
    }
  }
  chosen = group_best(values, indices, score, chosen);
  if (lid == 0) ids[ids_off + row] = !valid ? -1 : r.greedy ? best_token : chosen;
}
