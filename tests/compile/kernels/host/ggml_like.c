/* Functions named like ggml's CPU kernels, for tests/test_hostkernels.py. */

/* Called with a constant from two places and kept out of line, so gcc -O2 makes a
   helper.constprop.N clone. */
static __attribute__((noinline)) int helper(int *p, int n, int k) {
    int s = 0;
    for (int i = 0; i < n; i++) s += p[i] * k;
    return s;
}

/* The volatile local array gives a real stack frame. */
int ggml_vec_dot_q4_0_q8_0(int n, const float *x) {
    volatile float buf[64];
    for (int i = 0; i < 64; i++) buf[i] = x[i % n];
    float s = 0;
    for (int i = 0; i < 64; i++) s += buf[i];
    return (int)s;
}

void quantize_row_q8_0(int *p, int n) { p[0] = helper(p, n, 3); }
void dequantize_row_q8_0(int *p, int n) { p[1] = helper(p, n, 3); }

int not_a_kernel(int n) { return n + 1; }

#ifndef NO_MAIN
int main(int argc, char **argv) {
    (void)argv;
    float x[4] = {1, 2, 3, 4};
    int p[8] = {0};
    quantize_row_q8_0(p, argc);
    dequantize_row_q8_0(p, argc);
    return ggml_vec_dot_q4_0_q8_0(argc, x) + p[0] + not_a_kernel(argc);
}
#endif
