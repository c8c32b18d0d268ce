// Header-less HIP (-nogpuinc -nogpulib): the attributes the HIP headers would define, and the
// launch API the host-side kernel stubs refer to (declared only; nothing is launched).
#pragma once
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
typedef unsigned long size_t;
struct dim3 {
    unsigned x, y, z;
    __host__ __device__ dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
};
typedef struct ihipStream_t *hipStream_t;
extern "C" int __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shmem = 0, hipStream_t s = 0);
extern "C" int hipLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t shmem,
                               hipStream_t s);
