// Kernels a CUDA build holds that do no work, beside kernels that do: ggml's NO_DEVICE_CODE
// pattern (ggml-cuda/common.cuh: a printf of why, then __trap()), a bare trap, and kernels that
// trap only on a path their work goes round, or abort through assert alone.
#include <cassert>
#include <cstdio>

[[noreturn]] static __device__ void no_device_code(const char *file_name, const int line,
                                                   const char *function_name, const int arch,
                                                   const char *arch_list) {
    printf("%s:%d: ERROR: CUDA kernel %s has no device code compatible with CUDA arch %d. "
           "ggml-cuda.cu was compiled for: %s\n",
           file_name, line, function_name, arch, arch_list);
    __trap();
}

template <int cols> __global__ void mul_mat(const float *x, float *y, int n) {
#ifdef WITH_MUL_MAT
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = 0.f;
        for (int k = 0; k < cols; ++k) acc += x[i * cols + k];
        y[i] = acc;
    }
#else
    no_device_code(__FILE__, __LINE__, __FUNCTION__, 900, "800");
#endif
}
template __global__ void mul_mat<64>(const float *, float *, int);
template __global__ void mul_mat<128>(const float *, float *, int);

__global__ void trap_only(float *x) { __trap(); }

// Traps on a bad size only (a branch goes round the trap); else it works.
__global__ void guarded(float *x, int n) {
    if (n < 0) __trap();
    int i = threadIdx.x;
    if (i < n) x[i] = 2.f * x[i] + 1.f;
}

// Aborts through __assertfail, which is called, not trapped: judged as a kernel.
__global__ void assert_only(float *x) { assert(false); }

// Prints its argument and does nothing else: no trap, so judged as a kernel.
__global__ void print_only(int n) { printf("n = %d\n", n); }
