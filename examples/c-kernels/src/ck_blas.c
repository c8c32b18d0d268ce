/* Dot product, axpy and a blocked matrix multiply.
 *
 * The loops are written so that gcc and clang both vectorise them at -O2 for baseline x86-64
 * (SSE2): gcc 12's -O2 vectorises only loops that need neither a scalar remainder nor a
 * run-time check that their arrays do not overlap, so the bulk of each loop runs over a multiple
 * of 8 elements, the rest in a loop of its own, and outputs are restrict. */
#include "ck.h"

/* Eight running sums instead of one: a single sum is a chain of dependent additions, as slow as
 * the adder's latency whatever the compiler does; eight independent ones fill two vector
 * registers, which is what separates an -O2 build from -O0. */
#define LANES 8

static size_t bulk(size_t n)
{
    return n & ~(size_t)(LANES - 1);
}

float ck_dot_f32(size_t n, const float *x, const float *y)
{
    float acc[LANES] = {0};
    for (size_t i = 0; i < bulk(n); i += LANES) {
        for (size_t j = 0; j < LANES; j++) {
            acc[j] += x[i + j] * y[i + j];
        }
    }
    float sum = 0.0f;
    for (size_t j = 0; j < LANES; j++) {
        sum += acc[j];
    }
    for (size_t i = bulk(n); i < n; i++) {
        sum += x[i] * y[i];
    }
    return sum;
}

void ck_axpy_f32(size_t n, float a, const float *restrict x, float *restrict y)
{
    const size_t n8 = bulk(n);
    for (size_t i = 0; i < n8; i++) {
        y[i] += a * x[i];
    }
    for (size_t i = n8; i < n; i++) {
        y[i] += a * x[i];
    }
}

/* Blocks of 32 rows, 64 of the inner dimension and 64 columns: one block of b (16 KiB) and the
 * rows of c it updates stay in a 32 KiB L1 data cache while a block of a streams past. */
#define BLOCK_M 32
#define BLOCK_K 64
#define BLOCK_N 64

static size_t block_end(size_t start, size_t block, size_t limit)
{
    return start + block < limit ? start + block : limit;
}

void ck_gemm_f32(size_t m, size_t n, size_t k, const float *restrict a, const float *restrict b,
                 float *restrict c)
{
    for (size_t i = 0; i < m * n; i++) {
        c[i] = 0.0f;
    }
    for (size_t i0 = 0; i0 < m; i0 += BLOCK_M) {
        const size_t i1 = block_end(i0, BLOCK_M, m);
        for (size_t p0 = 0; p0 < k; p0 += BLOCK_K) {
            const size_t p1 = block_end(p0, BLOCK_K, k);
            for (size_t j0 = 0; j0 < n; j0 += BLOCK_N) {
                /* the row update inline, not a function of its own: gcc 12 leaves such a
                 * function's loop scalar once it is inlined here */
                const size_t len = block_end(j0, BLOCK_N, n) - j0, len8 = bulk(len);
                for (size_t i = i0; i < i1; i++) {
                    float *crow = c + i * n + j0;
                    for (size_t p = p0; p < p1; p++) {
                        const float aip = a[i * k + p];
                        const float *brow = b + p * n + j0;
                        for (size_t j = 0; j < len8; j++) {
                            crow[j] += aip * brow[j];
                        }
                        for (size_t j = len8; j < len; j++) {
                            crow[j] += aip * brow[j];
                        }
                    }
                }
            }
        }
    }
}
