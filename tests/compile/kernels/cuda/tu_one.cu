// First of two translation units linked into one host executable (tests/test_cuda.py). Both
// instantiate axpy<float>, so the executable holds that kernel once per translation unit.

template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template __global__ void axpy<float>(float, const float *, float *, int);

// A device function called from a kernel: with -rdc it keeps a code section of its own.
__device__ __noinline__ float squash(float v) { return v / (1.0f + fabsf(v)); }

__global__ void first(float *x) { x[threadIdx.x] = squash(x[threadIdx.x]); }
