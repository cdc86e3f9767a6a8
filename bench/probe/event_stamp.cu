/* One-off probe of the real device's time-slicing that share mode's accounting
 * relies on: when a process records an event on its idle stream while another
 * process's context holds the GPU, is the event stamped when it was recorded
 * or when its context gets the GPU? And how long do small kernels queued
 * behind one another take between markers?
 *
 *   event_stamp heavy SECS     kernels of 1 ms on every SM, 8 queued, for SECS
 *   event_stamp light SECS     every ~3 ms: record A, GAP_US of CPU work, then
 *                              4 x (10 us kernel, marker), sync; prints the
 *                              median and p90 of A->first marker, first->last
 *                              marker per kernel and the host's wait.
 * Build: nvcc -O2 -o event_stamp event_stamp.cu
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

__global__ void spin(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < ns);
}

static double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void cpu_spin_us(double us)
{
    double t0 = now_s();
    while ((now_s() - t0) * 1e6 < us)
        ;
}

static void pct(const char *what, std::vector<float> v)
{
    if (v.empty())
        return;
    std::sort(v.begin(), v.end());
    printf("%s: median %.1f us, p10 %.1f us, p90 %.1f us (n=%zu)\n", what, 1e3 * v[v.size() / 2],
           1e3 * v[v.size() / 10], 1e3 * v[v.size() * 9 / 10], v.size());
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: event_stamp heavy|light SECS [GAP_US]\n");
        return 2;
    }
    double secs = atof(argv[2]), gap = argc > 3 ? atof(argv[3]) : 0;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    double end = now_s() + secs;
    if (!strcmp(argv[1], "heavy")) {
        cudaEvent_t q[8];
        for (auto &e : q)
            cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
        unsigned long long n = 0;
        while (now_s() < end) {
            cudaEvent_t e = q[n % 8];
            if (n >= 8)
                cudaEventSynchronize(e);
            spin<<<1056, 128, 0, s>>>(1000000ULL);
            cudaEventRecord(e, s);
            n++;
        }
        cudaStreamSynchronize(s);
        printf("heavy: %llu kernels of 1 ms in %.1f s\n", n, secs);
        return 0;
    }
    cudaEvent_t a, m[4];
    cudaEventCreate(&a);
    for (auto &e : m)
        cudaEventCreate(&e);
    std::vector<float> first, per, host;
    spin<<<1, 32, 0, s>>>(1000);
    cudaStreamSynchronize(s);
    while (now_s() < end) {
        double h0 = now_s();
        cudaEventRecord(a, s);
        cpu_spin_us(gap);
        for (int i = 0; i < 4; i++) {
            spin<<<1, 32, 0, s>>>(10000ULL);
            cudaEventRecord(m[i], s);
        }
        cudaStreamSynchronize(s);
        host.push_back(float((now_s() - h0) * 1e3));
        float f = 0, l = 0;
        cudaEventElapsedTime(&f, a, m[0]);
        cudaEventElapsedTime(&l, m[0], m[3]);
        first.push_back(f);
        per.push_back(l / 3);
        std::this_thread::sleep_for(std::chrono::microseconds(3000));
    }
    printf("light, gap %.0f us:\n", gap);
    pct("  record A -> first marker", first);
    pct("  first -> last marker, per kernel", per);
    pct("  host: record A -> sync returned", host);
    return 0;
}
