/* Softmax and RMS normalisation, written like ck_blas.c so both compilers vectorise them. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ck.h"

#define LANES 8

static size_t bulk(size_t n)
{
    return n & ~(size_t)(LANES - 1);
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* exp(x) for x <= 0, to a few ulp: Cody-Waite range reduction by ln 2 and Cephes' degree-5
 * polynomial, 0 below -87 (where 2^n leaves the normal range). Compiled here rather than taken
 * from libm so that the kernel's time is the code this library's compiler produced: libm is the
 * same binary in every build. The range is handled with bit masks, not a branch or a ?: on
 * floats, which gcc may not turn into vector selects (a float operation may trap). */
static inline float exp_nonpositive(float x)
{
    const uint32_t in_range = 0u - (uint32_t)(x >= -87.0f); /* all ones, or 0 */
    const float xc = float_of((bits_of(x) & in_range) | (bits_of(-87.0f) & ~in_range));
    const float t = xc * 1.44269504088896341f;
    const int32_t n = (int32_t)(t - 0.5f); /* round to nearest for t <= 0 */
    const float r = (xc - (float)n * 0.693359375f) + (float)n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * r * r + r + 1.0f;
    return float_of(bits_of(e * float_of((uint32_t)(n + 127) << 23)) & in_range);
}

static float lane_sum(const float acc[LANES])
{
    float sum = 0.0f;
    for (size_t j = 0; j < LANES; j++) {
        sum += acc[j];
    }
    return sum;
}

void ck_softmax_f32(size_t n, const float *restrict x, float *restrict y)
{
    if (n == 0) {
        return;
    }
    const size_t n8 = bulk(n);
    float top[LANES];
    for (size_t j = 0; j < LANES; j++) {
        top[j] = x[0];
    }
    for (size_t i = 0; i < n8; i += LANES) {
        for (size_t j = 0; j < LANES; j++) {
            top[j] = x[i + j] > top[j] ? x[i + j] : top[j];
        }
    }
    float max = top[0];
    for (size_t j = 1; j < LANES; j++) {
        max = top[j] > max ? top[j] : max;
    }
    for (size_t i = n8; i < n; i++) {
        max = x[i] > max ? x[i] : max;
    }
    for (size_t i = 0; i < n8; i++) {
        y[i] = exp_nonpositive(x[i] - max);
    }
    for (size_t i = n8; i < n; i++) {
        y[i] = exp_nonpositive(x[i] - max);
    }
    float acc[LANES] = {0};
    for (size_t i = 0; i < n8; i += LANES) {
        for (size_t j = 0; j < LANES; j++) {
            acc[j] += y[i + j];
        }
    }
    float sum = lane_sum(acc);
    for (size_t i = n8; i < n; i++) {
        sum += y[i];
    }
    const float inv = 1.0f / sum;
    for (size_t i = 0; i < n8; i++) {
        y[i] *= inv;
    }
    for (size_t i = n8; i < n; i++) {
        y[i] *= inv;
    }
}

void ck_rmsnorm_f32(size_t n, const float *restrict x, const float *restrict w, float eps,
                    float *restrict y)
{
    if (n == 0) {
        return;
    }
    const size_t n8 = bulk(n);
    float acc[LANES] = {0};
    for (size_t i = 0; i < n8; i += LANES) {
        for (size_t j = 0; j < LANES; j++) {
            acc[j] += x[i + j] * x[i + j];
        }
    }
    float sum = lane_sum(acc);
    for (size_t i = n8; i < n; i++) {
        sum += x[i] * x[i];
    }
    const float scale = 1.0f / sqrtf(sum / (float)n + eps);
    for (size_t i = 0; i < n8; i++) {
        y[i] = x[i] * scale * w[i];
    }
    for (size_t i = n8; i < n; i++) {
        y[i] = x[i] * scale * w[i];
    }
}
