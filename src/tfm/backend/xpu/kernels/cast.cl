// out = x converted from the dtype DTYPE to the dtype OUT_DTYPE (build options), rounding to nearest even.
#define OUT_ELEM ELEM_AS(OUT_DTYPE)

__kernel void cast(__global const ELEM* x, long x_off, __global OUT_ELEM* out, long out_off, long n) {
  const long i = get_global_id(0);
  if (i < n) STORE_AS(OUT_DTYPE, LOAD(x, x_off + i), out, out_off + i);
}
