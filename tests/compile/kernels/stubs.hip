// Kernels whose code does no work, as ggml compiles a kernel for a type or an architecture the
// target does not build (ggml-cuda/common.cuh, NO_DEVICE_CODE), beside kernels that do work.
// WITH_MUL_MAT gives `mul_mat` real code, as ggml's architecture guards do for a target that
// supports it; without it, `mul_mat` is a stub.
#include "hip_noheaders.h"

extern "C" __device__ int printf(const char *, ...);

// Buffered printf (-mprintf-kind=buffered) takes its space from this function, which the device
// libraries provide to a real build and -nogpulib leaves to the source.
__device__ char printf_buffer[1 << 16];
__device__ unsigned printf_used;
extern "C" __device__ char *__printf_alloc(unsigned bytes) {
    unsigned at = __hip_atomic_fetch_add(&printf_used, bytes, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    return at + bytes <= sizeof(printf_buffer) ? printf_buffer + at : nullptr;
}

// ggml's own, for HIP: print where, then trap.
[[noreturn]] static __device__ void no_device_code(const char *file_name, const int line,
                                                   const char *function_name, const int arch) {
    printf("%s:%d: ERROR: HIP kernel %s has no device code compatible with HIP arch %d.\n", file_name, line,
           function_name, arch);
    __builtin_trap();
}
#define NO_DEVICE_CODE no_device_code(__FILE__, __LINE__, __FUNCTION__, 1151)

template <int D>
__global__ void mul_mat(const float *x, float *y, int n) {
#ifdef WITH_MUL_MAT
    unsigned row = __builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x();
    float sum = 0.0f;
    for (int i = 0; i < D; ++i) sum = __builtin_fmaf(x[row * D + i], x[i], sum);
    y[row] = sum;
#else
    NO_DEVICE_CODE;
#endif
}
template __global__ void mul_mat<64>(const float *, float *, int);
template __global__ void mul_mat<128>(const float *, float *, int);

// __trap() alone, and a kernel that does nothing at all.
extern "C" __global__ void trap_only(float *) { __builtin_trap(); }
extern "C" __global__ void empty(float *) {}

// Real work done in a function the kernel calls: the kernel must load its arguments to pass them.
__attribute__((noinline)) __device__ void scale_all(float *x, float a, int n) {
    for (int i = __builtin_amdgcn_workitem_id_x(); i < n; i += 64) x[i] *= a;
}
extern "C" __global__ void forward(float *x, float a, int n) { scale_all(x, a, n); }
