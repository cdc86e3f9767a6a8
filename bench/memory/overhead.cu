// Launch-rate and cudaMalloc/cudaFree latency, for running side by side with
// and without the interposer. Prints one JSON line of measured numbers.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

__global__ void empty_kernel() {}

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
    int launches = argc > 1 ? atoi(argv[1]) : 200000;
    int mallocs = argc > 2 ? atoi(argv[2]) : 20000;
    CHECK(cudaFree(0));
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 1>>>();
    CHECK(cudaDeviceSynchronize());
    std::vector<double> rates;
    for (int rep = 0; rep < 9; rep++) {
        double t0 = now_s();
        for (int i = 0; i < launches; i++) empty_kernel<<<1, 1>>>();
        CHECK(cudaDeviceSynchronize());
        rates.push_back(launches / (now_s() - t0));
    }
    std::vector<double> lat;
    void *p;
    for (int i = 0; i < 100; i++) { CHECK(cudaMalloc(&p, 1 << 20)); CHECK(cudaFree(p)); }
    for (int rep = 0; rep < 9; rep++) {
        double t0 = now_s();
        for (int i = 0; i < mallocs; i++) { CHECK(cudaMalloc(&p, 1 << 20)); CHECK(cudaFree(p)); }
        lat.push_back((now_s() - t0) / mallocs * 1e6);
    }
    std::sort(rates.begin(), rates.end());
    std::sort(lat.begin(), lat.end());
    printf("{\"launch_rate_median\": %.0f, \"malloc_free_1mib_us_median\": %.3f}\n", rates[4], lat[4]);
    return 0;
}
