/* The c-kernels library: a few float32 kernels of the kind an inference engine runs on the CPU.
 *
 * Every public function is named ck_*: qualify's compile stage finds them by that glob in
 * lib/libck.so and reads their stack frames from share/stack-usage. Arrays are row-major; an
 * output array must not overlap any input (restrict: the compilers vectorise on that promise).
 */
#ifndef CK_H
#define CK_H

#include <stddef.h>

/* sum over i of x[i] * y[i] */
float ck_dot_f32(size_t n, const float *x, const float *y);

/* y[i] += a * x[i] */
void ck_axpy_f32(size_t n, float a, const float *restrict x, float *restrict y);

/* c (m x n) = a (m x k) . b (k x n), in cache blocks */
void ck_gemm_f32(size_t m, size_t n, size_t k, const float *restrict a, const float *restrict b,
                 float *restrict c);

/* y = exp(x - max x) / sum exp(x - max x) */
void ck_softmax_f32(size_t n, const float *restrict x, float *restrict y);

/* y[i] = x[i] * w[i] / sqrt(mean(x^2) + eps) */
void ck_rmsnorm_f32(size_t n, const float *restrict x, const float *restrict w, float eps,
                    float *restrict y);

#endif
