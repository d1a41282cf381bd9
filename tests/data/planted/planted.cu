// Kernels with bottlenecks planted at known lines, and their well-behaved twins, for testing profctl's
// source-level diagnosis (profctl report --view source|stalls, profctl explain) against plain Nsight Compute.
// Every planted line carries a "PLANT:" marker comment; the tests find its line number by searching this file.
// Build: nvcc -O3 -lineinfo -arch=sm_90 -o planted planted.cu   (record.sh beside this file records it)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

// 1. Uncoalesced global loads: neighbouring threads read addresses `stride` floats apart, so a warp's 32 loads
//    touch 32 different 32-byte sectors instead of 4. The twin reads neighbouring floats.
__global__ void gather_strided(const float* __restrict__ in, float* __restrict__ out, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
#pragma unroll 4
    for (int k = 0; k < 32; ++k) {
        unsigned j = ((unsigned)i * (unsigned)stride + (unsigned)k * 1031u) & (unsigned)(n - 1);
        acc += in[j];  // PLANT: uncoalesced
    }
    out[i] = acc;
}

__global__ void gather_coalesced(const float* __restrict__ in, float* __restrict__ out, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
#pragma unroll 4
    for (int k = 0; k < 32; ++k) {
        unsigned j = ((unsigned)i + (unsigned)k * (unsigned)stride * 1031u) & (unsigned)(n - 1);
        acc += in[j];  // TWIN: coalesced
    }
    out[i] = acc;
}

// 2. An exp-bound loop: four independent chains of __expf per thread keep the special-function unit (MUFU,
//    16 results per clock per SM, against 128 FMAs) saturated. The twin does the same number of steps with FMAs.
__global__ void exp_loop(const float* __restrict__ in, float* __restrict__ out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = in[i], b = a + 0.25f, c = a + 0.5f, d = a + 0.75f;
    for (int k = 0; k < iters; ++k) {
        a = __expf(a * -0.5f); b = __expf(b * -0.5f); c = __expf(c * -0.5f); d = __expf(d * -0.5f);  // PLANT: exp
    }
    out[i] = a + b + c + d;
}

__global__ void fma_loop(const float* __restrict__ in, float* __restrict__ out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = in[i], b = a + 0.25f, c = a + 0.5f, d = a + 0.75f;
    for (int k = 0; k < iters; ++k) {
        a = fmaf(a, -0.5f, 0.9f); b = fmaf(b, -0.5f, 0.9f); c = fmaf(c, -0.5f, 0.9f); d = fmaf(d, -0.5f, 0.9f);  // TWIN: fma
    }
    out[i] = a + b + c + d;
}

// 3. Shared-memory bank conflicts: each lane reads column `k` of its own row of a 32x32 tile stored with a row
//    stride of 32 floats, so all 32 lanes hit the same bank (32-way conflict). The twin pads rows to 33 floats.
__global__ void smem_conflict(const float* __restrict__ in, float* __restrict__ out, int iters) {
    __shared__ float tile[32 * 32];
    int lane = threadIdx.x & 31;
    for (int t = threadIdx.x; t < 32 * 32; t += blockDim.x) tile[t] = in[blockIdx.x * 32 * 32 + t];
    __syncthreads();
    float acc = 0.f;
    for (int k = 0; k < iters; ++k) {
        acc += tile[lane * 32 + ((k + threadIdx.x / 32) & 31)];  // PLANT: bank conflict
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void smem_padded(const float* __restrict__ in, float* __restrict__ out, int iters) {
    __shared__ float tile[32 * 33];
    int lane = threadIdx.x & 31;
    for (int t = threadIdx.x; t < 32 * 32; t += blockDim.x) tile[(t / 32) * 33 + (t & 31)] = in[blockIdx.x * 32 * 32 + t];
    __syncthreads();
    float acc = 0.f;
    for (int k = 0; k < iters; ++k) {
        acc += tile[lane * 33 + ((k + threadIdx.x / 32) & 31)];  // TWIN: padded
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// `planted [--time] [only]`: launch each kernel once (under ncu: one profiled launch each), or with --time
// measure each over 20 launches and print its time and, for exp_loop, the exponentials per second (the MUFU
// roof). `only` runs one kernel by name.
int main(int argc, char** argv) {
    bool timing = argc > 1 && strcmp(argv[1], "--time") == 0;
    const char* only = argc > 1 + (int)timing ? argv[1 + (int)timing] : nullptr;
    const int n = 1 << 24, blocks = 132 * 64, iters = 1024;
    float *in, *out;
    CHECK(cudaMalloc(&in, (size_t)n * sizeof(float)));
    CHECK(cudaMalloc(&out, (size_t)n * sizeof(float)));
    CHECK(cudaMemset(in, 0, (size_t)n * sizeof(float)));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0)); CHECK(cudaEventCreate(&e1));
    auto run = [&](const char* name, auto launch, double work, const char* unit) {
        if (only && strcmp(only, name) != 0) return;
        launch();
        CHECK(cudaDeviceSynchronize());
        if (!timing) return;
        CHECK(cudaEventRecord(e0));
        for (int r = 0; r < 20; ++r) launch();
        CHECK(cudaEventRecord(e1)); CHECK(cudaEventSynchronize(e1));
        float ms = 0; CHECK(cudaEventElapsedTime(&ms, e0, e1)); ms /= 20;
        printf("%-18s %9.4f ms", name, ms);
        if (work > 0) printf("  %.4g %s", work / (ms * 1e-3), unit);
        printf("\n");
    };
    run("gather_strided", [&] { gather_strided<<<n / 256, 256>>>(in, out, n, 33); }, 32.0 * n * 4, "B/s requested");
    run("gather_coalesced", [&] { gather_coalesced<<<n / 256, 256>>>(in, out, n, 33); }, 32.0 * n * 4, "B/s requested");
    run("exp_loop", [&] { exp_loop<<<n / 256 / 16, 256>>>(in, out, n / 16, iters); }, 4.0 * iters * (n / 16), "exp/s");
    run("fma_loop", [&] { fma_loop<<<n / 256 / 16, 256>>>(in, out, n / 16, iters); }, 4.0 * iters * (n / 16), "fma/s");
    run("smem_conflict", [&] { smem_conflict<<<blocks, 256>>>(in, out, iters); }, 0, "");
    run("smem_padded", [&] { smem_padded<<<blocks, 256>>>(in, out, iters); }, 0, "");
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("ok\n");
    return 0;
}
