// OpenCL kernels for the AMDGPU resource-reader tests. Built with -nogpulib, so no OpenCL
// library builtins exist: only clang's __builtin_amdgcn_* and __builtin_fmaf are used.
#define GID() (__builtin_amdgcn_workgroup_id_x() * 256u + __builtin_amdgcn_workitem_id_x())

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void vadd(__global const float *a, __global const float *b, __global float *c) {
    unsigned i = GID();
    c[i] = a[i] + b[i];
}

// Uses 1 KiB of LDS, so group_segment_fixed_size is non-zero.
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void lds_reduce(__global const float *in, __global float *out) {
    __local float tile[256];
    unsigned l = __builtin_amdgcn_workitem_id_x();
    tile[l] = in[GID()];
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    for (unsigned s = 128; s > 0; s >>= 1) {
        if (l < s) tile[l] += tile[l + s];
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
        __builtin_amdgcn_s_barrier();
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    }
    if (l == 0) out[__builtin_amdgcn_workgroup_id_x()] = tile[0];
}

// Keeps N values live across a loop. Every index is a constant after full unrolling, so the
// array is promoted to registers and the allocator must spill beyond the VGPR budget
// (on gfx11; gfx90a spills into AGPRs instead).
// -DACC_WAVES=W asks for W waves per SIMD, which caps the VGPR budget (more spills, higher
// occupancy): how a test makes two builds of one source differ in a known direction.
#define N 320
#ifdef ACC_WAVES
#define ACC_ATTR __attribute__((amdgpu_waves_per_eu(ACC_WAVES, ACC_WAVES)))
#else
#define ACC_ATTR
#endif
__kernel ACC_ATTR void acc_spill(__global const float *in, __global float *out, int n) {
    float acc[N];
    unsigned g = GID();
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = in[g * N + k];
    for (int it = 0; it < n; ++it) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = __builtin_fmaf(acc[k], acc[(k * 7 + 3) % N], 1.0f);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k] * (float)k;
    out[g] = s;
}
