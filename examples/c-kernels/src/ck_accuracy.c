/* ck-accuracy: every kernel on fixed seeded inputs against a double-precision reference computed
 * here, written as the metrics JSON of qualify's `command` check (metrics = true):
 *
 *   ck-accuracy OUT_FILE
 *
 * One metric per kernel, rel_error_<kernel>: the largest error of an output element relative to
 * what that element's rounding can be blamed on (for a sum, the sum of the magnitudes of its
 * terms, so a result that cancels to near zero is not called inaccurate). Each of three seeds is
 * one sample; qualify judges their median against the plan's max_rel_error_* limits. The sizes
 * are not multiples of the kernels' 8 lanes or of the matrix blocks, so every remainder loop runs.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck.h"
#include "prng.h"

#define SEEDS 3
#define N 4099
#define GEMM_M 67
#define GEMM_N 45
#define GEMM_K 131

static const char *const NAMES[] = {"dot", "axpy", "gemm", "softmax", "rmsnorm"};
#define KERNELS (sizeof NAMES / sizeof NAMES[0])

static float *floats(size_t n)
{
    float *v = malloc(n * sizeof *v);
    if (v == NULL) {
        fprintf(stderr, "ck-accuracy: out of memory\n");
        exit(2);
    }
    return v;
}

/* |got - want| / scale, or |got - want| where scale is 0 (want and every term were 0) */
static double relative(double got, double want, double scale)
{
    double err = fabs(got - want);
    return scale > 0 ? err / scale : err;
}

static double dot_error(prng *g)
{
    float *x = floats(N), *y = floats(N);
    prng_fill(g, x, N, -1.0f, 1.0f);
    prng_fill(g, y, N, -1.0f, 1.0f);
    double want = 0, scale = 0;
    for (size_t i = 0; i < N; i++) {
        want += (double)x[i] * y[i];
        scale += fabs((double)x[i] * y[i]);
    }
    double err = relative(ck_dot_f32(N, x, y), want, scale);
    free(x);
    free(y);
    return err;
}

static double axpy_error(prng *g)
{
    float *x = floats(N), *y = floats(N), *y0 = floats(N);
    prng_fill(g, x, N, -1.0f, 1.0f);
    prng_fill(g, y0, N, -1.0f, 1.0f);
    memcpy(y, y0, N * sizeof *y);
    const float a = prng_uniform(g, -2.0f, 2.0f);
    ck_axpy_f32(N, a, x, y);
    double worst = 0;
    for (size_t i = 0; i < N; i++) {
        double e = relative(y[i], y0[i] + (double)a * x[i], fabs(y0[i]) + fabs((double)a * x[i]));
        worst = e > worst ? e : worst;
    }
    free(x);
    free(y);
    free(y0);
    return worst;
}

static double gemm_error(prng *g)
{
    float *a = floats(GEMM_M * GEMM_K), *b = floats(GEMM_K * GEMM_N), *c = floats(GEMM_M * GEMM_N);
    prng_fill(g, a, GEMM_M * GEMM_K, -1.0f, 1.0f);
    prng_fill(g, b, GEMM_K * GEMM_N, -1.0f, 1.0f);
    ck_gemm_f32(GEMM_M, GEMM_N, GEMM_K, a, b, c);
    double worst = 0;
    for (size_t i = 0; i < GEMM_M; i++) {
        for (size_t j = 0; j < GEMM_N; j++) {
            double want = 0, scale = 0;
            for (size_t p = 0; p < GEMM_K; p++) {
                want += (double)a[i * GEMM_K + p] * b[p * GEMM_N + j];
                scale += fabs((double)a[i * GEMM_K + p] * b[p * GEMM_N + j]);
            }
            double e = relative(c[i * GEMM_N + j], want, scale);
            worst = e > worst ? e : worst;
        }
    }
    free(a);
    free(b);
    free(c);
    return worst;
}

static double softmax_error(prng *g)
{
    float *x = floats(N), *y = floats(N);
    /* logits spread over 40 nats: the smallest probabilities are about e^-40 of the largest */
    prng_fill(g, x, N, -20.0f, 20.0f);
    ck_softmax_f32(N, x, y);
    double max = x[0], sum = 0;
    for (size_t i = 1; i < N; i++) {
        max = x[i] > max ? x[i] : max;
    }
    for (size_t i = 0; i < N; i++) {
        sum += exp(x[i] - max);
    }
    double worst = 0;
    for (size_t i = 0; i < N; i++) {
        double want = exp(x[i] - max) / sum;
        double e = relative(y[i], want, want);
        worst = e > worst ? e : worst;
    }
    free(x);
    free(y);
    return worst;
}

static double rmsnorm_error(prng *g)
{
    float *x = floats(N), *w = floats(N), *y = floats(N);
    prng_fill(g, x, N, -3.0f, 3.0f);
    prng_fill(g, w, N, 0.5f, 1.5f);
    const float eps = 1e-6f;
    ck_rmsnorm_f32(N, x, w, eps, y);
    double squares = 0;
    for (size_t i = 0; i < N; i++) {
        squares += (double)x[i] * x[i];
    }
    const double scale = 1.0 / sqrt(squares / N + eps);
    double worst = 0;
    for (size_t i = 0; i < N; i++) {
        double want = x[i] * scale * w[i];
        double e = relative(y[i], want, fabs(want));
        worst = e > worst ? e : worst;
    }
    free(x);
    free(w);
    free(y);
    return worst;
}

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: ck-accuracy OUT_FILE (the metrics JSON to write)\n");
        return 2;
    }
    double (*const measure[KERNELS])(prng *) = {dot_error, axpy_error, gemm_error, softmax_error,
                                                rmsnorm_error};
    double errors[KERNELS][SEEDS];
    for (size_t s = 0; s < SEEDS; s++) {
        for (size_t k = 0; k < KERNELS; k++) {
            /* a generator per kernel and seed: one kernel's inputs never depend on another's */
            prng g = {0xacc0000u + 0x100u * s + k};
            errors[k][s] = measure[k](&g);
        }
    }
    FILE *f = fopen(argv[1], "w");
    if (f == NULL) {
        fprintf(stderr, "ck-accuracy: cannot write %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    fprintf(f, "{\"schema_version\": 1, \"metrics\": [");
    printf("%-10s %s\n", "kernel", "relative error per seed");
    for (size_t k = 0; k < KERNELS; k++) {
        fprintf(f, "%s\n {\"name\": \"rel_error_%s\", \"unit\": \"\", \"higher_is_better\": false, "
                   "\"samples\": [",
                k ? "," : "", NAMES[k]);
        printf("%-10s", NAMES[k]);
        for (size_t s = 0; s < SEEDS; s++) {
            fprintf(f, "%s%.6g", s ? ", " : "", errors[k][s]);
            printf(" %10.3g", errors[k][s]);
        }
        fprintf(f, "]}");
        printf("\n");
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "ck-accuracy: cannot write %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    return 0;
}
