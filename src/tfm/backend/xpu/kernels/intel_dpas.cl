// y = x @ w^T + bias on Intel GPUs with DPAS (XMX) units, for DTYPE bf16 or f16: fp32 accumulation, the bias
// added before the one rounding of each output.
//
// Each sub-group of SUB_GROUP lanes (8 on Xe-HPG, 16 on Xe-HPC: a build option) computes one tile of y of 8
// rows by SUB_GROUP columns, walking K 16 at a time with one matrix_mad_k16 per step. A work-group stacks
// DPAS_SUB_GROUPS such tiles along the rows: local size (SUB_GROUP, DPAS_SUB_GROUPS), so the sub-group is
// local dimension 0 and its tile is
//   columns n0 .. n0 + SUB_GROUP - 1, n0 = get_group_id(0) * SUB_GROUP, lane l owning column n0 + l;
//   rows    m0 .. m0 + 7,             m0 = (get_group_id(1) * DPAS_SUB_GROUPS + get_local_id(1)) * 8.
// Operands of matrix_mad_k16 (cl_intel_subgroup_matrix_multiply_accumulate), for K step k0:
//   a: x[m0 + i][k0 .. k0 + 15] for row i = 0..7, spread over the lanes.
//      SUB_GROUP 8:  a[i] of lane l is the int holding elements 2l and 2l + 1 (one uint block read per row).
//      SUB_GROUP 16: a[i] of lane l is element l (one ushort block read per row).
//   b: w[n0 + l][k0 .. k0 + 15] in lane l, as 8 ints of element pairs (2j, 2j + 1) for j = 0..7: w is
//      (N, K) row-major, so w^T's column is w's row and these are 16 consecutive elements.
//   result: component i of lane l is y[m0 + i][n0 + l].
// Rows past M and columns past N read the last valid row / column (every lane must take part in each
// matrix_mad) and are not stored.
//
// The host launches it only where K is a multiple of 16 and x and w start 16-byte aligned (intel_linear.cpp).
// Built only for DPAS devices: Debian's driver declares neither the builtins nor the extension macro, so the
// host says it has DPAS with -DDPAS and the prototypes are declared here.
#if !defined(DPAS) || !defined(cl_intel_subgroups) || !defined(cl_intel_subgroups_short)
#error "intel_dpas.cl is for DPAS devices with cl_intel_subgroups and cl_intel_subgroups_short"
#endif

#if SUB_GROUP == 8
typedef int8 DpasA;
#define READ_A_ROW(row) as_int(intel_sub_group_block_read((const __global uint*)(row)))
#elif SUB_GROUP == 16
typedef short8 DpasA;
#define READ_A_ROW(row) as_short(intel_sub_group_block_read_us((const __global ushort*)(row)))
#else
#error "SUB_GROUP must be 8 (Xe-HPG) or 16 (Xe-HPC)"
#endif

// Overloadable, as in Intel's headers, so that the names are mangled the way the compiler recognises them.
float8 __attribute__((overloadable)) intel_sub_group_bf16_bf16_matrix_mad_k16(DpasA a, int8 b, float8 acc);
float8 __attribute__((overloadable)) intel_sub_group_f16_f16_matrix_mad_k16(DpasA a, int8 b, float8 acc);
#define bf16_MATRIX_MAD intel_sub_group_bf16_bf16_matrix_mad_k16
#define f16_MATRIX_MAD intel_sub_group_f16_f16_matrix_mad_k16
#define MATRIX_MAD CAT(DTYPE, _MATRIX_MAD)

__kernel __attribute__((reqd_work_group_size(SUB_GROUP, DPAS_SUB_GROUPS, 1)))
__attribute__((intel_reqd_sub_group_size(SUB_GROUP))) void linear_dpas(
    __global const ELEM* x, long x_off, __global const ELEM* w, long w_off, __global const ELEM* bias,
    long bias_off, __global ELEM* y, long y_off, int M, int K, int N) {
  const int lane = get_sub_group_local_id();
  const int n0 = get_group_id(0) * SUB_GROUP;
  const int m0 = (get_group_id(1) * DPAS_SUB_GROUPS + get_local_id(1)) * 8;
  const int n = min(n0 + lane, N - 1);  // this lane's column of w, clamped
  const __global ELEM* w_row = w + w_off + (long)n * K;

  float8 acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    DpasA a;
    a.s0 = READ_A_ROW(x + x_off + (long)min(m0 + 0, M - 1) * K + k0);
    a.s1 = READ_A_ROW(x + x_off + (long)min(m0 + 1, M - 1) * K + k0);
    a.s2 = READ_A_ROW(x + x_off + (long)min(m0 + 2, M - 1) * K + k0);
    a.s3 = READ_A_ROW(x + x_off + (long)min(m0 + 3, M - 1) * K + k0);
    a.s4 = READ_A_ROW(x + x_off + (long)min(m0 + 4, M - 1) * K + k0);
    a.s5 = READ_A_ROW(x + x_off + (long)min(m0 + 5, M - 1) * K + k0);
    a.s6 = READ_A_ROW(x + x_off + (long)min(m0 + 6, M - 1) * K + k0);
    a.s7 = READ_A_ROW(x + x_off + (long)min(m0 + 7, M - 1) * K + k0);
    const int8 b = as_int8(vload8(0, (const __global uint*)(w_row + k0)));
    acc = MATRIX_MAD(a, b, acc);
  }

  if (n0 + lane >= N) return;  // after the last matrix_mad: the sub-group no longer acts together
  const float add = bias ? LOAD(bias, bias_off + n0 + lane) : 0.0f;
  const float out[8] = {acc.s0, acc.s1, acc.s2, acc.s3, acc.s4, acc.s5, acc.s6, acc.s7};
  for (int i = 0; i < 8; ++i)
    if (m0 + i < M) STORE(out[i] + add, y, y_off + (long)(m0 + i) * N + n0 + lane);
}
