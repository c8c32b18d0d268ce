// C++ functions named like ggml's kernels, for tests/test_hostkernels.py: gcc writes demangled
// signatures into .su files, clang mangled names.
namespace ns {
struct K {
    static int ggml_compute_forward_add(int a, float *b);
};
int K::ggml_compute_forward_add(int a, float *b) {
    volatile char buf[100];
    buf[a % 100] = 1;
    return buf[0] + (int)b[0];
}
}  // namespace ns

int ggml_vec_dot_f16(int n, const float *x) {
    volatile float b[32];
    for (int i = 0; i < 32; i++) b[i] = x[i % n];
    return (int)b[3];
}

int main(int c, char **) {
    float x[2] = {1, 2};
    return ns::K::ggml_compute_forward_add(c, x) + ggml_vec_dot_f16(c, x);
}
