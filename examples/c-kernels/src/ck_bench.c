/* ck-bench: the time per call of every kernel at two sizes, as the metrics JSON qualify's bench
 * stage reads (format = "metrics"): one metric per kernel and size, its samples the repetitions.
 *
 *   ck-bench [--reps N] [--rep-ms MS] OUT_FILE
 *
 * Each repetition times enough calls to last about MS milliseconds (the count is calibrated
 * once per test, so a slow build makes fewer calls rather than a longer unit); the sample is
 * microseconds per call, lower is better: the fastest of four parts of the repetition, timed
 * apart (measure_all says why). A unit of the defaults takes about a third of a second.
 *
 * Time is this thread's processor time (CLOCK_THREAD_CPUTIME_ID), not the wall clock: on a
 * shared machine the time other processes hold the core is not counted against the kernel, so
 * a co-tenant that takes a core half of the time leaves a sample as it was instead of doubling
 * it. What such a co-tenant still changes (the caches it evicts) stays in the samples.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ck.h"
#include "prng.h"

enum kernel { DOT, AXPY, GEMM, SOFTMAX, RMSNORM };

typedef struct {
    const char *name; /* the metric's name */
    enum kernel kernel;
    size_t n; /* vector length, or the side of square matrices */
} bench_case;

/* Two sizes each: one whose operands fit in L1 and one that streams from L2, so a change in
 * either the arithmetic or the memory access shows. */
static const bench_case CASES[] = {
    {"dot_f32_n1024", DOT, 1024},         {"dot_f32_n32768", DOT, 32768},
    {"axpy_f32_n1024", AXPY, 1024},       {"axpy_f32_n32768", AXPY, 32768},
    {"gemm_f32_n32", GEMM, 32},           {"gemm_f32_n96", GEMM, 96},
    {"softmax_f32_n1024", SOFTMAX, 1024}, {"softmax_f32_n32768", SOFTMAX, 32768},
    {"rmsnorm_f32_n1024", RMSNORM, 1024}, {"rmsnorm_f32_n32768", RMSNORM, 32768},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])
#define MAX_REPS 100

typedef struct {
    float *x, *y, *w, *c;
} operands;

/* Keeps the result of a call alive, so no call can be dropped as dead code. */
static volatile float sink;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The operands of one test, in one page-aligned arena, the k-th operand 320 * k bytes past a
 * page boundary: the layout is the same in every build and every unit, and no two operands
 * start at the same offset within a page (loads that alias a store 4 KiB away stall, which
 * would time the allocator's choices rather than the kernel). */
static float *arena_alloc(size_t n, float **slots, size_t count)
{
    size_t stride = (n * sizeof(float) + 4095) / 4096 * 4096 + 4096;
    char *base = aligned_alloc(4096, stride * count);
    if (base == NULL) {
        fprintf(stderr, "ck-bench: out of memory (%zu bytes)\n", stride * count);
        exit(2);
    }
    for (size_t k = 0; k < count; k++) {
        slots[k] = (float *)(base + k * stride + 320 * k);
    }
    return (float *)base;
}

static void call(const bench_case *bc, const operands *o)
{
    size_t n = bc->n;
    switch (bc->kernel) {
    case DOT:
        sink = ck_dot_f32(n, o->x, o->y);
        break;
    case AXPY:
        ck_axpy_f32(n, 1e-7f, o->x, o->y);
        break;
    case GEMM:
        ck_gemm_f32(n, n, n, o->x, o->y, o->c);
        break;
    case SOFTMAX:
        ck_softmax_f32(n, o->x, o->c);
        break;
    case RMSNORM:
        ck_rmsnorm_f32(n, o->x, o->w, 1e-6f, o->c);
        break;
    }
}

static double time_calls(const bench_case *bc, const operands *o, long calls)
{
    double start = now_s();
    for (long i = 0; i < calls; i++) {
        call(bc, o);
    }
    return now_s() - start;
}

/* One test's operands and the calls that make a repetition of it. */
typedef struct {
    float *arena;
    operands o;
    long calls;
} prepared;

/* Fills a test's operands and calibrates it (warming its caches): double the calls until a
 * batch lasts a quarter of a repetition, then scale to a whole one. */
static void prepare(const bench_case *bc, double rep_s, prepared *p)
{
    size_t elems = bc->kernel == GEMM ? bc->n * bc->n : bc->n;
    float *slots[4];
    p->arena = arena_alloc(elems, slots, 4);
    p->o = (operands){slots[0], slots[1], slots[2], slots[3]};
    prng g = {0x5eed0000u + (uint64_t)bc->n};
    prng_fill(&g, p->o.x, elems, -1.0f, 1.0f);
    prng_fill(&g, p->o.y, elems, -1.0f, 1.0f);
    prng_fill(&g, p->o.w, elems, 0.5f, 1.5f);
    long calls = 1;
    double took = time_calls(bc, &p->o, calls);
    while (took < rep_s / 4) {
        calls *= 2;
        took = time_calls(bc, &p->o, calls);
    }
    p->calls = (long)((double)calls * rep_s / took) + 1;
}

/* Every test's samples, in us per call: `reps` rounds, each of SPREAD passes over every test,
 * a pass timing a SPREAD-th of the test's repetition; a sample is the fastest of its round's
 * passes. Interference only ever adds time (a co-tenant on the core's sibling, a frequency
 * step), so the fastest part of a repetition is the kernel's own time; spread over the round
 * rather than back to back, the parts of one sample are tens of milliseconds apart, and a burst
 * of interference shorter than that leaves one of them clean. A longer burst lands on a few
 * samples of many tests, which their medians pass over, instead of on every sample of one. */
#define SPREAD 4
static void measure_all(int reps, double rep_s, double samples[][MAX_REPS])
{
    prepared p[N_CASES];
    for (size_t t = 0; t < N_CASES; t++) {
        prepare(&CASES[t], rep_s, &p[t]);
    }
    for (int r = 0; r < reps; r++) {
        for (size_t t = 0; t < N_CASES; t++) {
            samples[t][r] = -1;
        }
        for (int pass = 0; pass < SPREAD; pass++) {
            for (size_t t = 0; t < N_CASES; t++) {
                long calls = p[t].calls / SPREAD + 1;
                time_calls(&CASES[t], &p[t].o, calls / 8 + 1); /* back into the caches */
                double us = 1e6 * time_calls(&CASES[t], &p[t].o, calls) / (double)calls;
                samples[t][r] = samples[t][r] < 0 || us < samples[t][r] ? us : samples[t][r];
            }
        }
    }
    for (size_t t = 0; t < N_CASES; t++) {
        free(p[t].arena);
    }
}

/* what was wrong with the command line (and the argument, when one is to blame), then how to
 * call; exit status 2 */
static int usage(const char *why, const char *argument)
{
    fprintf(stderr, "ck-bench: %s%s%s\nusage: ck-bench [--reps N (1-%d)] [--rep-ms MS] OUT_FILE\n",
            why, argument ? ": " : "", argument ? argument : "", MAX_REPS);
    return 2;
}

static int number(const char *text, double lo, double hi, double *value)
{
    char *end;
    errno = 0;
    *value = strtod(text, &end);
    return errno == 0 && end != text && *end == '\0' && *value >= lo && *value <= hi;
}

int main(int argc, char **argv)
{
    double reps = 5, rep_ms = 5;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        int reps_flag = strcmp(argv[i], "--reps") == 0, ms_flag = strcmp(argv[i], "--rep-ms") == 0;
        if ((reps_flag || ms_flag) && i + 1 == argc) {
            return usage("a value must follow", argv[i]);
        }
        if (reps_flag) {
            if (!number(argv[++i], 1, MAX_REPS, &reps) || reps != (int)reps) {
                return usage("--reps takes a whole number of repetitions from 1 to 100", argv[i]);
            }
        } else if (ms_flag) {
            if (!number(argv[++i], 0.1, 10000, &rep_ms)) {
                return usage("--rep-ms takes milliseconds from 0.1 to 10000", argv[i]);
            }
        } else if (argv[i][0] == '-' || out != NULL) {
            return usage(out != NULL ? "one metrics file only, got a second" : "unknown option",
                         argv[i]);
        } else {
            out = argv[i];
        }
    }
    if (out == NULL) {
        return usage("name the metrics file to write", NULL);
    }
    FILE *f = fopen(out, "w");
    if (f == NULL) {
        fprintf(stderr, "ck-bench: cannot write %s: %s\n", out, strerror(errno));
        return 2;
    }
    fprintf(f, "{\"schema_version\": 1, \"metrics\": [");
    printf("%-20s %12s %12s %12s\n", "test", "min us", "median us", "max us");
    static double all[N_CASES][MAX_REPS];
    int n = (int)reps;
    measure_all(n, rep_ms / 1000, all);
    for (size_t t = 0; t < N_CASES; t++) {
        double *samples = all[t];
        fprintf(f, "%s\n {\"name\": \"%s\", \"unit\": \"us\", \"higher_is_better\": false, \"samples\": [",
                t ? "," : "", CASES[t].name);
        double lo = samples[0], hi = samples[0];
        for (int r = 0; r < n; r++) {
            fprintf(f, "%s%.6g", r ? ", " : "", samples[r]);
            lo = samples[r] < lo ? samples[r] : lo;
            hi = samples[r] > hi ? samples[r] : hi;
        }
        fprintf(f, "]}");
        /* the middle sample by insertion sort: reps are few */
        for (int a = 1; a < n; a++) {
            for (int b = a; b > 0 && samples[b - 1] > samples[b]; b--) {
                double s = samples[b];
                samples[b] = samples[b - 1];
                samples[b - 1] = s;
            }
        }
        printf("%-20s %12.4g %12.4g %12.4g\n", CASES[t].name, lo, samples[n / 2], hi);
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "ck-bench: cannot write %s: %s\n", out, strerror(errno));
        return 2;
    }
    return 0;
}
