// Helpers every program of the xpu op kernels starts with (the host prepends this file to each source).
// Kernels take each buffer with an element offset (OpenCL buffers cannot be offset like pointers) and are
// launched on global sizes rounded up to whole work-groups, so they check their bounds.

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
