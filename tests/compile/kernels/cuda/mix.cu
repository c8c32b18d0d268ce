// Kernels for the instruction-mix tests (tests/compile/test_sass_mix.py): each one makes one
// class of SASS instruction certain, and only where its target has it, so that the same kernel
// compiled for an older target shows the class absent. Inline PTX only, no headers, so any
// nvcc compiles it.

// One m16n8k16 tensor-core product per warp (mma.sync, sm_80 on): HMMA.
__global__ void mma_tile(const unsigned *a, const unsigned *b, float *d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned l = threadIdx.x;
    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a[4 * l]), "r"(a[4 * l + 1]), "r"(a[4 * l + 2]), "r"(a[4 * l + 3]), "r"(b[2 * l]),
          "r"(b[2 * l + 1]));
    d[4 * l] = c0;
    d[4 * l + 1] = c1;
    d[4 * l + 2] = c2;
    d[4 * l + 3] = c3;
#endif
}

// One warpgroup product from shared-memory descriptors (wgmma, sm_90a only): HGMMA.
__global__ void warpgroup_mma(unsigned long long da, unsigned long long db, float *d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
    asm volatile("wgmma.fence.sync.aligned;");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, 0, 1, 1, 0, 0;"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "l"(da), "l"(db));
    asm volatile("wgmma.commit_group.sync.aligned;");
    asm volatile("wgmma.wait_group.sync.aligned 0;");
    unsigned l = threadIdx.x;
    d[4 * l] = c0;
    d[4 * l + 1] = c1;
    d[4 * l + 2] = c2;
    d[4 * l + 3] = c3;
#endif
}

// One product into tensor memory (tcgen05.mma, sm_100a only): UTCHMMA.
__global__ void tensor_memory_mma(unsigned long long da, unsigned long long db, unsigned idesc) {
#if defined(__CUDA_ARCH_FEAT_SM100_ALL)
    __shared__ unsigned taddr;
    unsigned slot = (unsigned)__cvta_generic_to_shared(&taddr);
    if (threadIdx.x < 32)
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" ::"r"(slot));
    asm volatile("tcgen05.fence::before_thread_sync;");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;");
    unsigned t = taddr;
    if (threadIdx.x == 0)
        asm volatile(
            "{.reg .pred p; setp.ne.b32 p, %4, 0; "
            "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;}" ::"r"(t),
            "l"(da), "l"(db), "r"(idesc), "r"(0));
    asm volatile("tcgen05.fence::before_thread_sync;");
    __syncthreads();
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" ::"r"(t));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
#endif
}

// Packed half-precision FMA on two lanes (fma.rn.f16x2): HFMA2.
__global__ void half2_fma(unsigned *x, unsigned y, unsigned z) {
    unsigned v = x[threadIdx.x];
    asm("fma.rn.f16x2 %0, %0, %1, %2;" : "+r"(v) : "r"(y), "r"(z));
    x[threadIdx.x] = v;
}

// Four-way byte dot product (dp4a): IDP.
__global__ void dot4(const int *a, const int *b, int *c) {
    unsigned l = threadIdx.x;
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a[l]), "r"(b[l]), "r"(c[l]));
    c[l] = r;
}

// Atomics on global memory with and without a result, and on shared memory.
__global__ void atomics(float *sum, int *count, int *slots) {
    __shared__ int hits[32];
    unsigned l = threadIdx.x;
    if (l < 32) hits[l] = 0;
    __syncthreads();
    atomicAdd(sum, 1.0f);
    slots[l] = atomicAdd(count, 1);
    atomicAdd(&hits[l % 32], 1);
    __syncthreads();
    if (l < 32) slots[1024 + l] = hits[l];
}

// A pointer that may be shared or global: the compiler must use generic (flat) access.
__global__ void generic_access(float *g, int pick) {
    __shared__ float s[256];
    unsigned l = threadIdx.x;
    s[l] = (float)l;
    __syncthreads();
    float *p = (pick & (1 << (l % 8))) ? s : g;
    p[l] = p[(l + 1) % 256] * 2.0f;
}

// An asynchronous global-to-shared copy (cp.async, sm_80 on): LDGSTS and its waits.
__global__ void async_copy(const float *g, float *out) {
    __shared__ float s[256];
    unsigned l = threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned dst = (unsigned)__cvta_generic_to_shared(&s[l]);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(g + l));
    asm volatile("cp.async.wait_all;");
#else
    s[l] = g[l];
#endif
    __syncthreads();
    out[l] = s[255 - l];
}

// A call on a divergent path, then a warp shuffle: convergence barriers, a call and a return.
__device__ __noinline__ float slow_path(float v, int n) {
    for (int i = 0; i < n; ++i) v = v * v + 1.f;
    return v;
}
__global__ void divergent(float *x, int n) {
    unsigned l = threadIdx.x;
    float v = x[l];
    if (l % 3 == 0) v = slow_path(v, n);
    v += __shfl_sync(0xffffffffu, v, 0);
    x[l] = v;
}
