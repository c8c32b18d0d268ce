// Kernels for the CUDA resource-reader tests (tests/test_cuda.py): each one makes a different
// figure of cuobjdump --dump-resource-usage non-trivial. No headers, so any nvcc compiles it.

#define N 160

// Keeps N floats live with data-dependent indexing. __launch_bounds__(1024, 2) leaves ptxas
// 32 registers per thread, so the array goes to the stack and ptxas reports spill bytes.
__global__ void __launch_bounds__(1024, 2) acc_spill(const float *in, float *out, int n) {
    float acc[N];
    unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = in[g * N + k];
    for (int it = 0; it < n; ++it) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], acc[(k * 7 + 3) % N], 1.0f);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k] * (float)k;
    out[g] = s;
}

// A device function that is not a kernel. Without -rdc it is compiled into its caller's code
// section; with -rdc it gets its own, and cuobjdump lists it as a Function.
__device__ __noinline__ float helper(const float *p, unsigned i) { return p[i] * 2.0f + p[i + 1]; }

// 16 KiB of static shared memory (sm_90 adds a 1 KiB reserve in the linked section size).
__global__ void __launch_bounds__(256) tile_sum(const float *in, float *out) {
    __shared__ float tile[4096];
    unsigned l = threadIdx.x;
    for (int k = 0; k < 16; ++k) tile[l + 256 * k] = in[l + 256 * k];
    __syncthreads();
    out[l] = tile[(l * 7) % 4096] + helper(in, l);
}

template <int K>
__global__ void scale_by(float *x, float a) {
    float v[K];
    for (int k = 0; k < K; ++k) v[k] = x[threadIdx.x * K + k];
    x[threadIdx.x] = v[(int)a % K] * a;
}
template __global__ void scale_by<8>(float *, float);
template __global__ void scale_by<64>(float *, float);

extern "C" __global__ void plain_c(float *x) { x[threadIdx.x] += 1.0f; }

// __maxnreg__ is recorded as EIATTR_MAXREG_COUNT, __block_size__ as EIATTR_REQNTID; nvcc
// accepts __block_size__ only from sm_90 on, so older targets compile `reqd` without it.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define BLOCK_128 __block_size__((128, 1, 1))
#else
#define BLOCK_128
#endif
extern "C" __global__ void __maxnreg__(40) capped(float *x) { x[threadIdx.x] *= 3.0f; }
extern "C" __global__ void BLOCK_128 reqd(float *x) { x[threadIdx.x] -= 1.0f; }
