/* ck-tests: unit tests of the kernels, written as JUnit XML for qualify's `tests` check:
 *
 *   ck-tests OUT_FILE
 *
 * Each case returns NULL when it passes or says what it found. Exit 0 when every case passed, 1
 * when one failed (the XML names it), 2 when the file could not be written.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ck.h"
#include "prng.h"

static char message[256];

/* a failure's message, kept in `message` until the next case */
static const char *fail(const char *format, double a, double b)
{
    snprintf(message, sizeof message, format, a, b);
    return message;
}

static int close_to(double got, double want, double tolerance)
{
    return fabs(got - want) <= tolerance * (fabs(want) > 1 ? fabs(want) : 1);
}

static const char *dot_empty(void)
{
    const float x[1] = {1}, y[1] = {1};
    float got = ck_dot_f32(0, x, y);
    return got == 0.0f ? NULL : fail("dot of no elements is %g, not %g", got, 0);
}

static const char *dot_exact_integers(void)
{
    /* small integers: every product and partial sum is exact in float, whatever the order */
    float x[37], y[37];
    double want = 0;
    for (int i = 0; i < 37; i++) {
        x[i] = (float)(i % 7 - 3);
        y[i] = (float)(i % 5 + 1);
        want += (double)x[i] * y[i];
    }
    float got = ck_dot_f32(37, x, y);
    return got == (float)want ? NULL : fail("dot of 37 integers is %g, not %g", got, want);
}

static const char *dot_every_tail_length(void)
{
    /* lengths 1..24 cross the 8-lane bulk and the remainder at every split */
    float x[24], y[24];
    for (int i = 0; i < 24; i++) {
        x[i] = 1.0f;
        y[i] = (float)(i + 1);
    }
    for (int n = 1; n <= 24; n++) {
        float got = ck_dot_f32((size_t)n, x, y);
        if (got != (float)(n * (n + 1) / 2)) {
            return fail("dot of 1..%g is %g", n, got);
        }
    }
    return NULL;
}

static const char *axpy_zero_alpha(void)
{
    float x[19], y[19];
    for (int i = 0; i < 19; i++) {
        x[i] = (float)i;
        y[i] = (float)(2 * i);
    }
    ck_axpy_f32(19, 0.0f, x, y);
    for (int i = 0; i < 19; i++) {
        if (y[i] != (float)(2 * i)) {
            return fail("axpy with a = 0 changed y[%g] to %g", i, y[i]);
        }
    }
    return NULL;
}

static const char *axpy_every_tail_length(void)
{
    for (int n = 1; n <= 24; n++) {
        float x[24], y[24];
        for (int i = 0; i < 24; i++) {
            x[i] = (float)(i + 1);
            y[i] = -1.0f;
        }
        ck_axpy_f32((size_t)n, 2.0f, x, y);
        for (int i = 0; i < 24; i++) {
            float want = i < n ? 2.0f * (float)(i + 1) - 1.0f : -1.0f;
            if (y[i] != want) {
                return fail("axpy of length %g wrote y[%g] wrong", n, i);
            }
        }
    }
    return NULL;
}

static const char *gemm_identity(void)
{
    enum { n = 70 }; /* more than one block of rows, columns and inner dimension */
    static float a[n * n], id[n * n], c[n * n];
    prng g = {7};
    prng_fill(&g, a, n * n, -1.0f, 1.0f);
    for (int i = 0; i < n * n; i++) {
        id[i] = i / n == i % n ? 1.0f : 0.0f;
    }
    ck_gemm_f32(n, n, n, a, id, c);
    for (int i = 0; i < n * n; i++) {
        if (c[i] != a[i]) {
            return fail("a . I differs from a at element %g (%g)", i, c[i]);
        }
    }
    return NULL;
}

static const char *gemm_small_exact(void)
{
    const float a[6] = {1, 2, 3, 4, 5, 6};    /* 2 x 3 */
    const float b[6] = {7, 8, 9, 10, 11, 12}; /* 3 x 2 */
    const float want[4] = {58, 64, 139, 154};
    float c[4] = {-1, -1, -1, -1}; /* overwritten, not accumulated into */
    ck_gemm_f32(2, 2, 3, a, b, c);
    for (int i = 0; i < 4; i++) {
        if (c[i] != want[i]) {
            return fail("c[%g] = %g", i, c[i]);
        }
    }
    return NULL;
}

static const char *gemm_ragged_blocks(void)
{
    /* sizes that are multiples of no block size, against a double-precision product */
    enum { m = 37, n = 75, k = 130 };
    static float a[m * k], b[k * n], c[m * n];
    prng g = {11};
    prng_fill(&g, a, m * k, -1.0f, 1.0f);
    prng_fill(&g, b, k * n, -1.0f, 1.0f);
    ck_gemm_f32(m, n, k, a, b, c);
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double want = 0, scale = 0;
            for (int p = 0; p < k; p++) {
                want += (double)a[i * k + p] * b[p * n + j];
                scale += fabs((double)a[i * k + p] * b[p * n + j]);
            }
            if (fabs(c[i * n + j] - want) > 1e-5 * scale) {
                return fail("c[%g] = %g is off the double-precision product", i * n + j, c[i * n + j]);
            }
        }
    }
    return NULL;
}

static const char *softmax_sums_to_one(void)
{
    float x[1001], y[1001];
    prng g = {3};
    prng_fill(&g, x, 1001, -10.0f, 10.0f);
    ck_softmax_f32(1001, x, y);
    double sum = 0;
    for (int i = 0; i < 1001; i++) {
        if (!(y[i] > 0.0f && y[i] <= 1.0f)) {
            return fail("y[%g] = %g is not a probability", i, y[i]);
        }
        sum += y[i];
    }
    return close_to(sum, 1.0, 1e-5) ? NULL : fail("probabilities sum to %.9g, not %g", sum, 1);
}

static const char *softmax_shift_invariant(void)
{
    /* adding a constant to every logit changes nothing: the kernel subtracts the maximum. The
     * logits are sixteenths below 128, so the shifted ones and their differences are exact and
     * the two results must agree bit for bit. */
    float x[50], shifted[50], y[50], z[50];
    for (int i = 0; i < 50; i++) {
        x[i] = (float)((i * 37) % 129 - 64) / 16.0f;
        shifted[i] = x[i] + 64.0f;
    }
    ck_softmax_f32(50, x, y);
    ck_softmax_f32(50, shifted, z);
    for (int i = 0; i < 50; i++) {
        if (y[i] != z[i]) {
            return fail("shifted logits change y by %g at %g", fabs(y[i] - z[i]), i);
        }
    }
    return NULL;
}

static const char *softmax_huge_logits(void)
{
    /* exp(1000) overflows float; a softmax that does not subtract the maximum returns NaN */
    const float x[3] = {1000.0f, 999.0f, -1000.0f};
    float y[3];
    ck_softmax_f32(3, x, y);
    double want0 = 1.0 / (1.0 + exp(-1.0));
    if (!close_to(y[0], want0, 1e-6)) {
        return fail("softmax(1000, 999, -1000)[0] = %g, not %g", y[0], want0);
    }
    return y[2] == 0.0f ? NULL : fail("e^-2000 came out as %g, not %g", y[2], 0);
}

static const char *softmax_single_element(void)
{
    const float x[1] = {-3.5f};
    float y[1];
    ck_softmax_f32(1, x, y);
    return y[0] == 1.0f ? NULL : fail("softmax of one logit is %g, not %g", y[0], 1);
}

static const char *rmsnorm_unit_rms(void)
{
    float x[333], w[333], y[333];
    prng g = {9};
    prng_fill(&g, x, 333, -5.0f, 5.0f);
    for (int i = 0; i < 333; i++) {
        w[i] = 1.0f;
    }
    ck_rmsnorm_f32(333, x, w, 0.0f, y);
    double squares = 0;
    for (int i = 0; i < 333; i++) {
        squares += (double)y[i] * y[i];
    }
    double rms = sqrt(squares / 333);
    return close_to(rms, 1.0, 1e-5) ? NULL : fail("rms of the output is %.9g, not %g", rms, 1);
}

static const char *rmsnorm_scale_invariant(void)
{
    /* x and 4x normalise alike, bit for bit: scaling by a power of two is exact at every step */
    float x[64], x4[64], w[64], y[64], z[64];
    prng g = {13};
    prng_fill(&g, x, 64, -2.0f, 2.0f);
    prng_fill(&g, w, 64, 0.5f, 1.5f);
    for (int i = 0; i < 64; i++) {
        x4[i] = 4.0f * x[i];
    }
    ck_rmsnorm_f32(64, x, w, 0.0f, y);
    ck_rmsnorm_f32(64, x4, w, 0.0f, z);
    for (int i = 0; i < 64; i++) {
        if (y[i] != z[i]) {
            return fail("4x the input changes y[%g] by %g", i, fabs(y[i] - z[i]));
        }
    }
    return NULL;
}

static const char *rmsnorm_weights_and_eps(void)
{
    /* x = (3, 4): mean square 12.5; with eps 3.5 the scale is 1/4, and w scales each element */
    const float x[2] = {3.0f, 4.0f}, w[2] = {2.0f, 0.5f};
    float y[2];
    ck_rmsnorm_f32(2, x, w, 3.5f, y);
    if (y[0] != 1.5f || y[1] != 0.5f) {
        return fail("rmsnorm((3, 4), w = (2, 0.5), eps = 3.5) = (%g, %g), not (1.5, 0.5)", y[0], y[1]);
    }
    return NULL;
}

typedef struct {
    const char *classname, *name;
    const char *(*run)(void);
} test_case;

static const test_case CASES[] = {
    {"ck.dot", "empty", dot_empty},
    {"ck.dot", "exact_integers", dot_exact_integers},
    {"ck.dot", "every_tail_length", dot_every_tail_length},
    {"ck.axpy", "zero_alpha", axpy_zero_alpha},
    {"ck.axpy", "every_tail_length", axpy_every_tail_length},
    {"ck.gemm", "identity", gemm_identity},
    {"ck.gemm", "small_exact", gemm_small_exact},
    {"ck.gemm", "ragged_blocks", gemm_ragged_blocks},
    {"ck.softmax", "sums_to_one", softmax_sums_to_one},
    {"ck.softmax", "shift_invariant", softmax_shift_invariant},
    {"ck.softmax", "huge_logits", softmax_huge_logits},
    {"ck.softmax", "single_element", softmax_single_element},
    {"ck.rmsnorm", "unit_rms", rmsnorm_unit_rms},
    {"ck.rmsnorm", "scale_invariant", rmsnorm_scale_invariant},
    {"ck.rmsnorm", "weights_and_eps", rmsnorm_weights_and_eps},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* text as an XML attribute value */
static void xml_attribute(FILE *f, const char *text)
{
    for (; *text; text++) {
        switch (*text) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*text, f);
        }
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: ck-tests OUT_FILE (the JUnit XML to write)\n");
        return 2;
    }
    const char *results[N_CASES];
    double seconds[N_CASES];
    size_t failures = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        double start = now_s();
        const char *why = CASES[i].run();
        seconds[i] = now_s() - start;
        /* the message buffer is reused by the next case: keep a copy */
        results[i] = why ? strdup(why) : NULL;
        failures += why != NULL;
        printf("%-4s %s::%s%s%s\n", why ? "FAIL" : "ok", CASES[i].classname, CASES[i].name,
               why ? ": " : "", why ? why : "");
    }
    FILE *f = fopen(argv[1], "w");
    if (f == NULL) {
        fprintf(stderr, "ck-tests: cannot write %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuites>\n <testsuite name=\"ck\" tests=\"%zu\" failures=\"%zu\" errors=\"0\">\n",
            (size_t)N_CASES, failures);
    for (size_t i = 0; i < N_CASES; i++) {
        fprintf(f, "  <testcase classname=\"%s\" name=\"%s\" time=\"%.6f\"", CASES[i].classname,
                CASES[i].name, seconds[i]);
        if (results[i] == NULL) {
            fprintf(f, "/>\n");
            continue;
        }
        fprintf(f, "><failure message=\"");
        xml_attribute(f, results[i]);
        fprintf(f, "\"/></testcase>\n");
    }
    fprintf(f, " </testsuite>\n</testsuites>\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "ck-tests: cannot write %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    printf("%zu of %zu cases passed\n", (size_t)N_CASES - failures, (size_t)N_CASES);
    return failures ? 1 : 0;
}
