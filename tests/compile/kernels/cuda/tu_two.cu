// Second translation unit of the two-TU executable: another kernel, the shared axpy<float>
// instantiation, and main (which never launches anything: the tests only read the binary).

template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template __global__ void axpy<float>(float, const float *, float *, int);
template __global__ void axpy<double>(double, const double *, double *, int);

__global__ void second(unsigned *out) {
    __shared__ unsigned counts[32];
    counts[threadIdx.x % 32] = 0;
    __syncthreads();
    atomicAdd(&counts[threadIdx.x % 32], 1u);
    __syncthreads();
    out[threadIdx.x] = counts[threadIdx.x % 32];
}

int main() { return 0; }
