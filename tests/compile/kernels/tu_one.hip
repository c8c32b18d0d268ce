// First translation unit: a plain, a template and an anonymous-namespace kernel (the last is
// renamed <name>.intern.<hash> under -fgpu-rdc).
#include "hip_noheaders.h"

extern "C" __global__ void scale(float *x, float a) {
    unsigned i = __builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x();
    x[i] = __builtin_fmaf(x[i], a, 1.0f);
}

template <int K>
__global__ void tile_sum(const float *in, float *out) {
    __shared__ float tile[K];
    unsigned l = __builtin_amdgcn_workitem_id_x();
    tile[l % K] = in[l];
    __builtin_amdgcn_s_barrier();
    out[l] = tile[(l + 1) % K];
}
template __global__ void tile_sum<512>(const float *, float *);

namespace {
__global__ void hidden(float *x) { x[__builtin_amdgcn_workitem_id_x()] *= 2.0f; }
}  // namespace
void *keep_hidden = (void *)&hidden;
