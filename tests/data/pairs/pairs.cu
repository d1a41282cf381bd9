// Planted kernel pairs for measuring how often `profctl explain` names the right cause (issue 33).
// Each pair is a kernel A with ONE known fault and a kernel B doing the same work without it (same results,
// checked by --check). The line that carries a fault ends with a comment "PLANT: <cause-id>"; faults that live in
// the launch configuration (occupancy-*, tail-effect, too-few-blocks) have no line. benchmarks/explain_accuracy/
// record.sh times the pairs and records them with plain Nsight Compute.
//
// Build:  nvcc -O3 -lineinfo -arch=sm_90 -o pairs pairs.cu
// Usage:  pairs --list                    one line per pair: id group cause A B
//         pairs --check [pair...]         run A and B once each and compare their outputs
//         pairs --time OUT.json [pair...] median of 60 timed launches per kernel after 3 warm-ups (CUDA events)
//         pairs --record GROUP            per pair of GROUP: A and B once (warm-up), then A and B once more, each
//                                         inside NVTX ranges measure/<pair>.<a|b> (what ncu --nvtx-include selects)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define LAUNCHED() CHECK(cudaGetLastError())

static int g_sms = 132;  // the device's multiprocessor count, read in main

// ------------------------------------------------------------------------------------------------ data set-up
__device__ __forceinline__ uint32_t hash32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

__global__ void init_uniform(float* p, size_t n, uint32_t seed, float lo, float hi) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = lo + (hi - lo) * (float)(hash32((uint32_t)i * 2654435761u ^ seed) >> 8) * (1.0f / 16777216.0f);
}

__global__ void init_words(uint32_t* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = hash32((uint32_t)i + seed * 0x9e3779b9u);
}

// every one of a line's 32 ints holds the next line of a random single cycle: a warp that follows it loads one
// whole 128-byte line per step, and each step depends on the last (a latency-bound chase)
__global__ void expand_lines(const int* __restrict__ perm, int* __restrict__ nxt, int lines) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)lines * 32; i += (size_t)gridDim.x * blockDim.x)
        nxt[i] = perm[i >> 5];
}

static float* new_floats(size_t n, uint32_t seed, float lo, float hi) {
    float* p = nullptr;
    CHECK(cudaMalloc(&p, n * sizeof(float)));
    init_uniform<<<g_sms * 16, 256>>>(p, n, seed, lo, hi); LAUNCHED();
    return p;
}

static float* new_zeros(size_t n) {
    float* p = nullptr;
    CHECK(cudaMalloc(&p, n * sizeof(float)));
    CHECK(cudaMemset(p, 0, n * sizeof(float)));
    return p;
}

static int* new_chase_table(int lines, uint32_t seed) {
    std::vector<int> perm(lines);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(seed);
    for (int i = lines - 1; i > 0; --i) {  // Sattolo: one cycle through every line
        int j = (int)(rng() % (uint32_t)i);
        std::swap(perm[i], perm[j]);
    }
    int *dperm = nullptr, *nxt = nullptr;
    CHECK(cudaMalloc(&dperm, (size_t)lines * sizeof(int)));
    CHECK(cudaMalloc(&nxt, (size_t)lines * 32 * sizeof(int)));
    CHECK(cudaMemcpy(dperm, perm.data(), (size_t)lines * sizeof(int), cudaMemcpyHostToDevice));
    expand_lines<<<g_sms * 16, 256>>>(dperm, nxt, lines); LAUNCHED();
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(dperm));
    return nxt;
}

// ------------------------------------------------------------------- 1. uncoalesced-global: y = A x, row-major A
// A: one thread per row, so neighbouring lanes read addresses a whole row (2 KB) apart: 32 sectors per request.
__global__ void gemv_thread_per_row(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
                                    int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = a + (size_t)r * cols;
    float acc = 0.f;
#pragma unroll 4
    for (int j = 0; j < cols; ++j) {
        acc = fmaf(row[j], x[j], acc);  // PLANT: uncoalesced-global
    }
    y[r] = acc;
}

// B: one warp per row, lanes read neighbouring floats, then a shuffle reduction.
__global__ void gemv_warp_per_row(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
                                  int rows, int cols) {
    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (w >= rows) return;
    const float* row = a + (size_t)w * cols;
    float acc = 0.f;
#pragma unroll 4
    for (int j = lane; j < cols; j += 32) acc = fmaf(row[j], x[j], acc);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[w] = acc;
}

// ------------------------------------------------------------------- 2. smem-bank-conflict: tiled transpose
constexpr int TD = 32, TR = 8;
// A: 32x32 tile without padding: the column read hits one bank 32 times per warp.
__global__ void transpose_smem_unpadded(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float tile[TD][TD];
    int x = blockIdx.x * TD + threadIdx.x, y = blockIdx.y * TD + threadIdx.y;
    for (int k = 0; k < TD; k += TR) tile[threadIdx.y + k][threadIdx.x] = in[(size_t)(y + k) * n + x];
    __syncthreads();
    x = blockIdx.y * TD + threadIdx.x;
    y = blockIdx.x * TD + threadIdx.y;
    for (int k = 0; k < TD; k += TR) {
        out[(size_t)(y + k) * n + x] = tile[threadIdx.x][threadIdx.y + k];  // PLANT: smem-bank-conflict
    }
}

// B: rows padded to 33 floats: the column read touches 32 different banks.
__global__ void transpose_smem_padded(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float tile[TD][TD + 1];
    int x = blockIdx.x * TD + threadIdx.x, y = blockIdx.y * TD + threadIdx.y;
    for (int k = 0; k < TD; k += TR) tile[threadIdx.y + k][threadIdx.x] = in[(size_t)(y + k) * n + x];
    __syncthreads();
    x = blockIdx.y * TD + threadIdx.x;
    y = blockIdx.x * TD + threadIdx.y;
    for (int k = 0; k < TD; k += TR) {
        out[(size_t)(y + k) * n + x] = tile[threadIdx.x][threadIdx.y + k];
    }
}

// --------------------------------------------- 3. local-memory (dynamic index): 4-bit codes through a codebook
// Each 32-bit word holds eight 4-bit codes; y[w] = sum of the eight codebook entries (a scaled 16-entry codebook).
// A: each thread keeps its own copy of the codebook in an array indexed by the data: local memory, where the
// lanes' different codes touch up to 16 different lines per load.
__global__ void decode_lut_local(const uint32_t* __restrict__ words, const float* __restrict__ codebook,
                                 const float* __restrict__ scales, float* __restrict__ y, int nwords) {
    float lut[16];
    float s = scales[blockIdx.x & 63];
#pragma unroll
    for (int k = 0; k < 16; ++k) lut[k] = codebook[k] * s;
    for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < nwords; w += gridDim.x * blockDim.x) {
        uint32_t c = words[w];
        float acc = 0.f;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            acc += lut[(c >> (4 * q)) & 15u];  // PLANT: local-memory
        }
        y[w] = acc;
    }
}

// B: one copy of the scaled codebook per block, in shared memory (16 words in 16 banks: no conflict).
__global__ void decode_lut_shared(const uint32_t* __restrict__ words, const float* __restrict__ codebook,
                                  const float* __restrict__ scales, float* __restrict__ y, int nwords) {
    __shared__ float lut[16];
    if (threadIdx.x < 16) lut[threadIdx.x] = codebook[threadIdx.x] * scales[blockIdx.x & 63];
    __syncthreads();
    for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < nwords; w += gridDim.x * blockDim.x) {
        uint32_t c = words[w];
        float acc = 0.f;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            acc += lut[(c >> (4 * q)) & 15u];
        }
        y[w] = acc;
    }
}

// ------------------------------------------------ 4. local-memory (register spills): 64 accumulators per thread
constexpr int NACC = 64;
// A: __launch_bounds__(256, 8) caps the kernel at 32 registers: the accumulators spill, and every step of the
// loop loads and stores them from local memory.
__global__ void __launch_bounds__(256, 8) poly_spilled(const float* __restrict__ in, const float* __restrict__ coef,
                                                      float* __restrict__ out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc[NACC];
    float v = in[i];
#pragma unroll
    for (int j = 0; j < NACC; ++j) acc[j] = v + 0.015625f * j;
    for (int k = 0; k < iters; ++k) {
        float c = coef[k & 255];
#pragma unroll
        for (int j = 0; j < NACC; ++j) acc[j] = fmaf(acc[j], c, acc[(j + 1) % NACC] * 0.5f);  // PLANT: local-memory
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < NACC; ++j) s += acc[j];
    out[i] = s;
}

// B: the same code allowed up to 128 registers: no spill (fewer blocks per SM, enough independent FMAs).
__global__ void __launch_bounds__(256, 2) poly_in_registers(const float* __restrict__ in, const float* __restrict__ coef,
                                                           float* __restrict__ out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc[NACC];
    float v = in[i];
#pragma unroll
    for (int j = 0; j < NACC; ++j) acc[j] = v + 0.015625f * j;
    for (int k = 0; k < iters; ++k) {
        float c = coef[k & 255];
#pragma unroll
        for (int j = 0; j < NACC; ++j) acc[j] = fmaf(acc[j], c, acc[(j + 1) % NACC] * 0.5f);
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < NACC; ++j) s += acc[j];
    out[i] = s;
}

// ------------------------------------------- a latency-bound chase (occupancy pairs: its speed is warps in flight)
__device__ __forceinline__ int chase(const int* __restrict__ nxt, int line, int lane, int steps) {
    for (int s = 0; s < steps; ++s) line = nxt[(size_t)line * 32 + lane];
    return line;
}

__device__ __forceinline__ int chase_start(int t, int lines) { return (int)(((uint32_t)(t >> 5) * 7919u) % (uint32_t)lines); }

// ------------------------------------------------------------- 5. occupancy-registers: values held across the chase
constexpr int KEEP = 96;
// A: loads 96 values before the chase and adds them after it: they stay live in registers across the loop
// (over 100 registers a thread: 2 blocks of 256 per SM instead of 8).
__global__ void __launch_bounds__(256) chase_keep_early(const int* __restrict__ nxt, const float* __restrict__ keep,
                                                        float* __restrict__ out, int lines, int steps) {
    int t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    float kv[KEEP];
#pragma unroll
    for (int j = 0; j < KEEP; ++j) kv[j] = keep[(size_t)j * nt + t];
    int line = chase(nxt, chase_start(t, lines), t & 31, steps);
    float acc = (float)line;
#pragma unroll
    for (int j = 0; j < KEEP; ++j) acc += kv[j];
    out[t] = acc;
}

// B: the same loads after the chase: short live ranges, few registers, full occupancy.
__global__ void __launch_bounds__(256) chase_keep_late(const int* __restrict__ nxt, const float* __restrict__ keep,
                                                       float* __restrict__ out, int lines, int steps) {
    int t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    int line = chase(nxt, chase_start(t, lines), t & 31, steps);
    float acc = (float)line;
#pragma unroll
    for (int j = 0; j < KEEP; ++j) acc += keep[(size_t)j * nt + t];
    out[t] = acc;
}

// ---------------------------------------------------- 6. occupancy-shared-memory: unused dynamic shared memory
// A is launched with 100 KB of dynamic shared memory it never touches: 2 blocks per SM instead of 8.
__global__ void __launch_bounds__(256) chase_smem_reserved(const int* __restrict__ nxt, float* __restrict__ out,
                                                           int lines, int steps) {
    extern __shared__ float reserved[];  // never used
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = (float)chase(nxt, chase_start(t, lines), t & 31, steps);
}

__global__ void __launch_bounds__(256) chase_smem_none(const int* __restrict__ nxt, float* __restrict__ out,
                                                       int lines, int steps) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = (float)chase(nxt, chase_start(t, lines), t & 31, steps);
}

// ------------------------------------------- 7. occupancy-block-size: 32-thread blocks hit 32 blocks per SM
// The chase through a table in DRAM; A in blocks of 32 threads (32 warps per SM at most), B in blocks of 256.
__global__ void chase_blocks_of_32(const int* __restrict__ nxt, float* __restrict__ out, int lines, int steps) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = (float)chase(nxt, chase_start(t, lines), t & 31, steps);
}

__global__ void chase_blocks_of_256(const int* __restrict__ nxt, float* __restrict__ out, int lines, int steps) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = (float)chase(nxt, chase_start(t, lines), t & 31, steps);
}

// ------------------------------------------------------------------------- 8. tail-effect: one block too many
constexpr int TAIL_FMA = 256, TAIL_ILP = 16;
__device__ __forceinline__ float tail_poly(float v) {
#pragma unroll 16
    for (int k = 0; k < TAIL_FMA; ++k) v = fmaf(v, 0.9990234375f, 0.0009765625f);
    return v;
}

// A: block b owns 1024 x per_thread consecutive elements; the grid is one full wave plus one block (sized at run
// time from the device's SMs and blocks per SM), so the last block runs alone in a second wave.
__global__ void __launch_bounds__(1024) tail_wave_plus_one(const float* __restrict__ in, float* __restrict__ out,
                                                           int per_thread) {
    size_t base = (size_t)blockIdx.x * blockDim.x * per_thread + threadIdx.x;
    for (int j = 0; j < per_thread; j += TAIL_ILP) {
        float v[TAIL_ILP];
#pragma unroll
        for (int u = 0; u < TAIL_ILP; ++u) v[u] = in[base + (size_t)(j + u) * blockDim.x];
#pragma unroll 16
        for (int k = 0; k < TAIL_FMA; ++k) {
#pragma unroll
            for (int u = 0; u < TAIL_ILP; ++u) v[u] = fmaf(v[u], 0.9990234375f, 0.0009765625f);
        }
#pragma unroll
        for (int u = 0; u < TAIL_ILP; ++u) out[base + (size_t)(j + u) * blockDim.x] = v[u];
    }
}

// B: the same elements spread over exactly one wave of blocks (grid-stride), the remainder one element a thread.
__global__ void __launch_bounds__(1024) tail_one_wave(const float* __restrict__ in, float* __restrict__ out, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; e + (TAIL_ILP - 1) * stride < n; e += TAIL_ILP * stride) {
        float v[TAIL_ILP];
#pragma unroll
        for (int u = 0; u < TAIL_ILP; ++u) v[u] = in[e + u * stride];
#pragma unroll 16
        for (int k = 0; k < TAIL_FMA; ++k) {
#pragma unroll
            for (int u = 0; u < TAIL_ILP; ++u) v[u] = fmaf(v[u], 0.9990234375f, 0.0009765625f);
        }
#pragma unroll
        for (int u = 0; u < TAIL_ILP; ++u) out[e + u * stride] = v[u];
    }
    for (; e < n; e += stride) out[e] = tail_poly(in[e]);
}

// ------------------------------------------------------------ 9. too-few-blocks: a grid-stride loop on 16 blocks
__global__ void poly_16_blocks(const float* __restrict__ in, float* __restrict__ out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = in[i];
#pragma unroll 16
        for (int k = 0; k < 128; ++k) v = fmaf(v, 0.9990234375f, 0.0009765625f);
        out[i] = v;
    }
}

__global__ void poly_full_grid(const float* __restrict__ in, float* __restrict__ out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = in[i];
#pragma unroll 16
        for (int k = 0; k < 128; ++k) v = fmaf(v, 0.9990234375f, 0.0009765625f);
        out[i] = v;
    }
}

// ---------------------------------------------------------- 10. warp-divergence: odd and even lanes, two loops
// A: element i is thread i, so odd and even lanes of every warp take different loops (the warp runs both).
__global__ void odd_even_lanes(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = in[i];
    if (i & 1) {  // PLANT: warp-divergence
#pragma unroll 8
        for (int k = 0; k < 512; ++k) v = fmaf(v, 0.999f, 0.001f);
    } else {
#pragma unroll 8
        for (int k = 0; k < 512; ++k) v = fmaf(v, -0.5f, 0.75f);
    }
    out[i] = v;
}

// B: the same elements remapped so that even warps take the even elements and odd warps the odd ones.
__global__ void odd_even_warps(const float* __restrict__ in, float* __restrict__ out, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int w = t >> 5, lane = t & 31;
    int i = (w >> 1) * 64 + 2 * lane + (w & 1);
    if (i >= n) return;
    float v = in[i];
    if (i & 1) {
#pragma unroll 8
        for (int k = 0; k < 512; ++k) v = fmaf(v, 0.999f, 0.001f);
    } else {
#pragma unroll 8
        for (int k = 0; k < 512; ++k) v = fmaf(v, -0.5f, 0.75f);
    }
    out[i] = v;
}

// ----------------------------------------------------------- 11. atomic-contention: one address, every element
__device__ __forceinline__ float atomic_work(float v) {
#pragma unroll 16
    for (int k = 0; k < 512; ++k) v = fmaf(v, 0.999f, 0.001f);
    return v;
}

// A: every element adds itself to one float in global memory.
__global__ void sum_atomic_per_element(const float* __restrict__ in, float* __restrict__ sum, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = atomic_work(in[i]);
        atomicAdd(sum, v);  // PLANT: atomic-contention
    }
}

// B: per-thread sums, a warp shuffle and a shared-memory reduction, then one atomic per block.
__global__ void sum_atomic_per_block(const float* __restrict__ in, float* __restrict__ sum, int n) {
    __shared__ float part[32];
    float acc = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += atomic_work(in[i]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) atomicAdd(sum, v);
    }
}

// ------------------------------------------- 12. barrier-sync: a block-wide sum per step of an iterative smoothing
// One 256-float row per block of 256 threads; `iters` times x <- x/2 + mean(x)/2.
// A: the sum as a shared-memory tree with a __syncthreads after every level (10 barriers a step).
__global__ void __launch_bounds__(256) smooth_tree_barriers(const float* __restrict__ in, float* __restrict__ out,
                                                            int iters) {
    __shared__ float sh[256];
    int t = threadIdx.x;
    float x = in[(size_t)blockIdx.x * 256 + t];
    for (int it = 0; it < iters; ++it) {
        sh[t] = x;
        __syncthreads();
        for (int s = 128; s > 0; s >>= 1) {
            if (t < s) sh[t] += sh[t + s];
            __syncthreads();  // PLANT: barrier-sync
        }
        float total = sh[0];
        __syncthreads();
        x = fmaf(x, 0.5f, total * (0.5f / 256.f));
    }
    out[(size_t)blockIdx.x * 256 + t] = x;
}

// B: warp shuffles, then the 8 warp sums through shared memory (2 barriers a step).
__global__ void __launch_bounds__(256) smooth_warp_shuffles(const float* __restrict__ in, float* __restrict__ out,
                                                            int iters) {
    __shared__ float sh[8];
    int t = threadIdx.x, lane = t & 31, w = t >> 5;
    float x = in[(size_t)blockIdx.x * 256 + t];
    for (int it = 0; it < iters; ++it) {
        float s = x;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) sh[w] = s;
        __syncthreads();
        float total = 0.f;
#pragma unroll
        for (int k = 0; k < 8; ++k) total += sh[k];
        __syncthreads();
        x = fmaf(x, 0.5f, total * (0.5f / 256.f));
    }
    out[(size_t)blockIdx.x * 256 + t] = x;
}

// ------------------------------------------- 13. l2-thrashing: 8 random-sign projections of the same data
// out[b][p] = sum_k x[b*chunk + k] * sign(k, p) for p < 8: every element is read 8 times.
constexpr int NP = 8, L2_TILE = 2048;
__device__ __forceinline__ float proj_sign(int k, int p) {
    return (((uint32_t)k * 2654435761u + (uint32_t)p * 2246822519u) >> 31) ? 1.f : -1.f;
}

__device__ __forceinline__ void proj_store(float (&acc)[NP], float* __restrict__ out) {
    __shared__ float part[NP][8];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int p = 0; p < NP; ++p) {
        float v = acc[p];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) part[p][w] = v;
    }
    __syncthreads();
    if (threadIdx.x < NP) {
        float v = 0.f;
        for (int k = 0; k < 8; ++k) v += part[threadIdx.x][k];
        out[blockIdx.x * NP + threadIdx.x] = v;
    }
}

// A: pass after pass over the block's whole 256 KB chunk: between two reads of an element the whole grid reads
// 256 MB, over four times the H200's L2 (60 MB as the device reports it), so every pass comes from DRAM again.
__global__ void __launch_bounds__(256) project_pass_by_pass(const float* __restrict__ x, float* __restrict__ out,
                                                            int chunk) {
    const float* base = x + (size_t)blockIdx.x * chunk;
    float acc[NP];
#pragma unroll
    for (int p = 0; p < NP; ++p) {
        float a = 0.f;
#pragma unroll 4
        for (int k = threadIdx.x; k < chunk; k += blockDim.x) {
            a = fmaf(base[k], proj_sign(k, p), a);  // PLANT: l2-thrashing
        }
        acc[p] = a;
    }
    proj_store(acc, out);
}

// B: the same loads tile by tile (8 KB per block): the 8 passes over a tile reuse it from cache.
__global__ void __launch_bounds__(256) project_tile_by_tile(const float* __restrict__ x, float* __restrict__ out,
                                                            int chunk) {
    const float* base = x + (size_t)blockIdx.x * chunk;
    float acc[NP];
#pragma unroll
    for (int p = 0; p < NP; ++p) acc[p] = 0.f;
    for (int t0 = 0; t0 < chunk; t0 += L2_TILE) {
#pragma unroll
        for (int p = 0; p < NP; ++p) {
#pragma unroll 4
            for (int k = t0 + threadIdx.x; k < t0 + L2_TILE; k += blockDim.x) {
                acc[p] = fmaf(base[k], proj_sign(k, p), acc[p]);
            }
        }
    }
    proj_store(acc, out);
}

// ------------------------------------------------------ 14. sfu-bound: dependent exponentials at the SFU roof
// Four independent chains a <- 2^(-a/2 log2 e) = e^(-a/2) per thread: the exp2 of a softmax, without the rest.
// ex2.approx.ftz is one MUFU.EX2 (16 results per clock per SM, against 128 FMAs), as in attention kernels.
__device__ __forceinline__ float ex2_sfu(float y) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
    return r;
}

// 2^y for -126 < y <= 0 on the FMA pipe (FlashAttention-4's trick): y = j + f with j the nearest integer
// (through the 1.5 * 2^23 shifter), 2^f by a cubic (relative error 1.1e-4), j added to the exponent bits.
__device__ __forceinline__ float ex2_fma(float y) {
    float t = y + 12582912.f;
    float f = y - (t - 12582912.f);
    float p = fmaf(fmaf(fmaf(0.05459282f, f, 0.24221784f), f, 0.6933686f), f, 1.f);
    return __uint_as_float(__float_as_uint(p) + (__float_as_uint(t) << 23));
}

constexpr float NEG_HALF_LOG2E = -0.72134752f;
// A: every exp on the SFU.
__global__ void exp_chains_sfu(const float* __restrict__ in, float* __restrict__ out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = in[i], b = a + 0.25f, c = a + 0.5f, d = a + 0.75f;
    for (int k = 0; k < iters; ++k) {
        a = ex2_sfu(a * NEG_HALF_LOG2E); b = ex2_sfu(b * NEG_HALF_LOG2E); c = ex2_sfu(c * NEG_HALF_LOG2E); d = ex2_sfu(d * NEG_HALF_LOG2E);  // PLANT: sfu-bound
    }
    out[i] = a + b + c + d;
}

// B: chains c and d by the polynomial, a and b on the SFU: the two pipes share the work.
__global__ void exp_chains_split(const float* __restrict__ in, float* __restrict__ out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = in[i], b = a + 0.25f, c = a + 0.5f, d = a + 0.75f;
    for (int k = 0; k < iters; ++k) {
        a = ex2_sfu(a * NEG_HALF_LOG2E); b = ex2_sfu(b * NEG_HALF_LOG2E); c = ex2_fma(c * NEG_HALF_LOG2E); d = ex2_fma(d * NEG_HALF_LOG2E);
    }
    out[i] = a + b + c + d;
}

// ======================================================================================== the pairs, as objects
struct Pair {
    const char *id, *group, *cause, *a, *b;
    double rtol;  // relative tolerance of the A/B comparison (0: bit-identical expected)
    float *out_a = nullptr, *out_b = nullptr;
    size_t out_n = 0;
    std::vector<void*> bufs;
    Pair(const char* i, const char* g, const char* c, const char* ka, const char* kb, double tol)
        : id(i), group(g), cause(c), a(ka), b(kb), rtol(tol) {}
    virtual ~Pair() {}
    virtual void setup() = 0;
    virtual void run_a() = 0;
    virtual void run_b() = 0;
    virtual void before_check() {}
    void outputs(size_t n) {
        out_n = n; out_a = new_zeros(n); out_b = new_zeros(n);
        bufs.push_back(out_a); bufs.push_back(out_b);
    }
    template <class T> T* keep(T* p) { bufs.push_back((void*)p); return p; }
    void teardown() {
        for (void* p : bufs) CHECK(cudaFree(p));
        bufs.clear(); out_a = out_b = nullptr;
    }
};

struct Gemv : Pair {
    int rows = 131072, cols = 512; float *m, *x;
    Gemv() : Pair("gemv_rows", "cuda_mem", "uncoalesced-global", "gemv_thread_per_row", "gemv_warp_per_row", 1e-4) {}
    void setup() override {
        m = keep(new_floats((size_t)rows * cols, 1, -1.f, 1.f)); x = keep(new_floats(cols, 2, -1.f, 1.f));
        outputs(rows);
    }
    void run_a() override { gemv_thread_per_row<<<rows / 256, 256>>>(m, x, out_a, rows, cols); LAUNCHED(); }
    void run_b() override { gemv_warp_per_row<<<rows / 8, 256>>>(m, x, out_b, rows, cols); LAUNCHED(); }
};

struct Transpose : Pair {
    int n = 8192; float* in;
    Transpose() : Pair("transpose_tile", "cuda_mem", "smem-bank-conflict", "transpose_smem_unpadded",
                       "transpose_smem_padded", 0) {}
    void setup() override { in = keep(new_floats((size_t)n * n, 3, -1.f, 1.f)); outputs((size_t)n * n); }
    void run_a() override { transpose_smem_unpadded<<<dim3(n / TD, n / TD), dim3(TD, TR)>>>(in, out_a, n); LAUNCHED(); }
    void run_b() override { transpose_smem_padded<<<dim3(n / TD, n / TD), dim3(TD, TR)>>>(in, out_b, n); LAUNCHED(); }
};

struct Lut : Pair {
    int nwords = 1 << 25; uint32_t* words; float *cb, *sc;
    Lut() : Pair("codebook_lut", "cuda_mem", "local-memory", "decode_lut_local", "decode_lut_shared", 0) {}
    void setup() override {
        CHECK(cudaMalloc(&words, (size_t)nwords * sizeof(uint32_t))); keep(words);
        init_words<<<g_sms * 16, 256>>>(words, nwords, 4); LAUNCHED();
        cb = keep(new_floats(16, 5, -1.f, 1.f)); sc = keep(new_floats(64, 6, 0.5f, 2.f));
        outputs(nwords);
    }
    void run_a() override { decode_lut_local<<<g_sms * 8, 256>>>(words, cb, sc, out_a, nwords); LAUNCHED(); }
    void run_b() override { decode_lut_shared<<<g_sms * 8, 256>>>(words, cb, sc, out_b, nwords); LAUNCHED(); }
};

struct Spill : Pair {
    int n = 1 << 18, iters = 256; float *in, *coef;
    Spill() : Pair("spill_accumulators", "cuda_exec", "local-memory", "poly_spilled", "poly_in_registers", 0) {}
    void setup() override { in = keep(new_floats(n, 7, 0.f, 1.f)); coef = keep(new_floats(256, 8, 0.45f, 0.55f)); outputs(n); }
    void run_a() override { poly_spilled<<<n / 256, 256>>>(in, coef, out_a, n, iters); LAUNCHED(); }
    void run_b() override { poly_in_registers<<<n / 256, 256>>>(in, coef, out_b, n, iters); LAUNCHED(); }
};

struct ChaseKeep : Pair {
    int lines = 1 << 17, steps = 512, nt = 0; int* nxt; float* kv;
    ChaseKeep() : Pair("chase_live_registers", "cuda_occ", "occupancy-registers", "chase_keep_early",
                       "chase_keep_late", 0) {}
    void setup() override {
        nt = g_sms * 2048;
        nxt = keep(new_chase_table(lines, 9)); kv = keep(new_floats((size_t)KEEP * nt, 10, 0.f, 1.f));
        outputs(nt);
    }
    void run_a() override { chase_keep_early<<<nt / 256, 256>>>(nxt, kv, out_a, lines, steps); LAUNCHED(); }
    void run_b() override { chase_keep_late<<<nt / 256, 256>>>(nxt, kv, out_b, lines, steps); LAUNCHED(); }
};

struct ChaseSmem : Pair {
    int lines = 1 << 17, steps = 512, nt = 0, smem = 100 * 1024; int* nxt;
    ChaseSmem() : Pair("chase_unused_smem", "cuda_occ", "occupancy-shared-memory", "chase_smem_reserved",
                       "chase_smem_none", 0) {}
    void setup() override {
        nt = g_sms * 2048;
        CHECK(cudaFuncSetAttribute(chase_smem_reserved, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        nxt = keep(new_chase_table(lines, 11));
        outputs(nt);
    }
    void run_a() override { chase_smem_reserved<<<nt / 256, 256, smem>>>(nxt, out_a, lines, steps); LAUNCHED(); }
    void run_b() override { chase_smem_none<<<nt / 256, 256>>>(nxt, out_b, lines, steps); LAUNCHED(); }
};

struct ChaseBlock : Pair {
    int lines = 1 << 21, steps = 128, nt = 0; int* nxt;
    ChaseBlock() : Pair("chase_tiny_blocks", "cuda_occ", "occupancy-block-size", "chase_blocks_of_32",
                        "chase_blocks_of_256", 0) {}
    void setup() override { nt = g_sms * 2048; nxt = keep(new_chase_table(lines, 12)); outputs(nt); }
    void run_a() override { chase_blocks_of_32<<<nt / 32, 32>>>(nxt, out_a, lines, steps); LAUNCHED(); }
    void run_b() override { chase_blocks_of_256<<<nt / 256, 256>>>(nxt, out_b, lines, steps); LAUNCHED(); }
};

struct Tail : Pair {
    int per_thread = 64, wave_a = 0, wave_b = 0; size_t n = 0; float* in;
    Tail() : Pair("tail_one_extra_block", "cuda_occ", "tail-effect", "tail_wave_plus_one", "tail_one_wave", 0) {}
    void setup() override {
        int bps_a = 0, bps_b = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps_a, tail_wave_plus_one, 1024, 0));
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps_b, tail_one_wave, 1024, 0));
        wave_a = g_sms * bps_a; wave_b = g_sms * bps_b;
        n = (size_t)(wave_a + 1) * 1024 * per_thread;
        printf("tail: %d SMs, %d (A) / %d (B) blocks of 1024 per SM; A grid %d, B grid %d, %zu elements\n",
               g_sms, bps_a, bps_b, wave_a + 1, wave_b, n);
        in = keep(new_floats(n, 13, 0.f, 1.f)); outputs(n);
    }
    void run_a() override { tail_wave_plus_one<<<wave_a + 1, 1024>>>(in, out_a, per_thread); LAUNCHED(); }
    void run_b() override { tail_one_wave<<<wave_b, 1024>>>(in, out_b, n); LAUNCHED(); }
};

struct Few : Pair {
    int n = 1 << 24; float* in;
    Few() : Pair("grid_16_blocks", "cuda_occ", "too-few-blocks", "poly_16_blocks", "poly_full_grid", 0) {}
    void setup() override { in = keep(new_floats(n, 14, 0.f, 1.f)); outputs(n); }
    void run_a() override { poly_16_blocks<<<16, 256>>>(in, out_a, n); LAUNCHED(); }
    void run_b() override { poly_full_grid<<<g_sms * 8, 256>>>(in, out_b, n); LAUNCHED(); }
};

struct Diverge : Pair {
    int n = 1 << 22; float* in;
    Diverge() : Pair("odd_even_branches", "cuda_exec", "warp-divergence", "odd_even_lanes", "odd_even_warps", 0) {}
    void setup() override { in = keep(new_floats(n, 15, 0.f, 1.f)); outputs(n); }
    void run_a() override { odd_even_lanes<<<n / 256, 256>>>(in, out_a, n); LAUNCHED(); }
    void run_b() override { odd_even_warps<<<n / 256, 256>>>(in, out_b, n); LAUNCHED(); }
};

// A's 2M float additions into one running total round at the total's magnitude (0.8 % off B's tree sum at 8M
// elements in a first run): the two agree to 1e-2, not bit for bit.
struct Atomic : Pair {
    int n = 1 << 21; float* in;
    Atomic() : Pair("sum_one_address", "cuda_exec", "atomic-contention", "sum_atomic_per_element",
                    "sum_atomic_per_block", 1e-2) {}
    void setup() override { in = keep(new_floats(n, 16, 0.f, 1.f)); outputs(1); }
    void before_check() override { CHECK(cudaMemset(out_a, 0, 4)); CHECK(cudaMemset(out_b, 0, 4)); }
    void run_a() override { sum_atomic_per_element<<<g_sms * 8, 256>>>(in, out_a, n); LAUNCHED(); }
    void run_b() override { sum_atomic_per_block<<<g_sms * 8, 256>>>(in, out_b, n); LAUNCHED(); }
};

struct Barrier : Pair {
    int rows = 0, iters = 128; float* in;
    Barrier() : Pair("block_sum_barriers", "cuda_exec", "barrier-sync", "smooth_tree_barriers",
                     "smooth_warp_shuffles", 1e-4) {}
    void setup() override { rows = g_sms * 32; in = keep(new_floats((size_t)rows * 256, 17, 0.f, 1.f)); outputs((size_t)rows * 256); }
    void run_a() override { smooth_tree_barriers<<<rows, 256>>>(in, out_a, iters); LAUNCHED(); }
    void run_b() override { smooth_warp_shuffles<<<rows, 256>>>(in, out_b, iters); LAUNCHED(); }
};

struct L2Thrash : Pair {
    int blocks = 1024, chunk = 65536; float* x;
    L2Thrash() : Pair("projections_reuse", "cuda_mem", "l2-thrashing", "project_pass_by_pass",
                      "project_tile_by_tile", 0) {}
    void setup() override { x = keep(new_floats((size_t)blocks * chunk, 18, -1.f, 1.f)); outputs((size_t)blocks * NP); }
    void run_a() override { project_pass_by_pass<<<blocks, 256>>>(x, out_a, chunk); LAUNCHED(); }
    void run_b() override { project_tile_by_tile<<<blocks, 256>>>(x, out_b, chunk); LAUNCHED(); }
};

struct ExpChains : Pair {
    int n = 1 << 20, iters = 1024; float* in;
    ExpChains() : Pair("exp_chains", "cuda_exec", "sfu-bound", "exp_chains_sfu", "exp_chains_split", 1e-3) {}
    void setup() override { in = keep(new_floats(n, 19, 0.f, 1.f)); outputs(n); }
    void run_a() override { exp_chains_sfu<<<n / 256, 256>>>(in, out_a, n, iters); LAUNCHED(); }
    void run_b() override { exp_chains_split<<<n / 256, 256>>>(in, out_b, n, iters); LAUNCHED(); }
};

static std::vector<Pair*> all_pairs() {
    return {new Gemv, new Transpose, new Lut, new L2Thrash, new ChaseKeep, new ChaseSmem, new ChaseBlock,
            new Tail, new Few, new Spill, new Diverge, new Atomic, new Barrier, new ExpChains};
}

// ======================================================================================== modes
// worst |A - B| relative to the largest |B|: 0 for the pairs that must agree bit for bit
static bool compare(Pair* p, double* worst) {
    std::vector<float> a(p->out_n), b(p->out_n);
    CHECK(cudaMemcpy(a.data(), p->out_a, p->out_n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b.data(), p->out_b, p->out_n * sizeof(float), cudaMemcpyDeviceToHost));
    double diff = 0, scale = 0; bool ok = true;
    for (size_t i = 0; i < p->out_n; ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) { ok = false; continue; }
        diff = std::max(diff, std::fabs((double)a[i] - (double)b[i]));
        scale = std::max(scale, std::fabs((double)b[i]));
    }
    *worst = scale > 0 ? diff / scale : diff;
    return ok && *worst <= p->rtol;
}

static double median_us(Pair* p, bool a, int reps) {
    for (int r = 0; r < 3; ++r) a ? p->run_a() : p->run_b();
    std::vector<cudaEvent_t> ev(2 * reps);
    for (auto& e : ev) CHECK(cudaEventCreate(&e));
    for (int r = 0; r < reps; ++r) {
        CHECK(cudaEventRecord(ev[2 * r]));
        a ? p->run_a() : p->run_b();
        CHECK(cudaEventRecord(ev[2 * r + 1]));
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<double> t(reps);
    for (int r = 0; r < reps; ++r) {
        float ms = 0; CHECK(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1])); t[r] = ms * 1e3;
    }
    for (auto& e : ev) CHECK(cudaEventDestroy(e));
    std::sort(t.begin(), t.end());
    return reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
}

static bool wanted(Pair* p, int argc, char** argv, int first) {
    if (argc <= first) return true;
    for (int i = first; i < argc; ++i)
        if (!strcmp(argv[i], p->id) || !strcmp(argv[i], p->group)) return true;
    return false;
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: pairs --list | --check [pair..] | --time OUT.json [pair..] | --record GROUP\n"); return 2; }
    std::string mode = argv[1];
    std::vector<Pair*> pairs = all_pairs();
    if (mode == "--list") {
        for (Pair* p : pairs) printf("%s %s %s %s %s\n", p->id, p->group, p->cause, p->a, p->b);
        return 0;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    printf("device %s, %d SMs, cc %d.%d, L2 %d MB\n", prop.name, g_sms, prop.major, prop.minor, prop.l2CacheSize >> 20);
    int failed = 0;
    if (mode == "--check") {
        for (Pair* p : pairs) {
            if (!wanted(p, argc, argv, 2)) continue;
            p->setup(); p->before_check(); p->run_a(); p->run_b(); CHECK(cudaDeviceSynchronize());
            double w = 0; bool ok = compare(p, &w);
            printf("check %-22s %-24s A=%s B=%s: %s (max |A-B| / max |B| = %.3g, tolerance %.3g)\n", p->id,
                   p->cause, p->a, p->b, ok ? "ok" : "FAIL", w, p->rtol);
            failed += !ok;
            p->teardown();
        }
    } else if (mode == "--time") {
        if (argc < 3) { fprintf(stderr, "--time needs an output path\n"); return 2; }
        FILE* f = fopen(argv[2], "w");
        if (!f) { perror(argv[2]); return 1; }
        fprintf(f, "{\"device\": \"%s\", \"sms\": %d, \"reps\": 60, \"stat\": \"median of per-launch CUDA event times\", \"pairs\": [", prop.name, g_sms);
        bool first = true;
        for (Pair* p : pairs) {
            if (!wanted(p, argc, argv, 3)) continue;
            p->setup(); p->before_check(); p->run_a(); p->run_b(); CHECK(cudaDeviceSynchronize());
            double w = 0; bool ok = compare(p, &w);
            double ta = median_us(p, true, 60), tb = median_us(p, false, 60);
            printf("time %-22s %-24s A %-26s %10.1f us  B %-26s %10.1f us  A/B %.2f  check %s\n", p->id, p->cause,
                   p->a, ta, p->b, tb, ta / tb, ok ? "ok" : "FAIL");
            fprintf(f, "%s\n  {\"id\": \"%s\", \"cause\": \"%s\", \"a\": \"%s\", \"b\": \"%s\", \"time_a_us\": %.2f, "
                       "\"time_b_us\": %.2f, \"check\": \"%s\", \"worst_rel_diff\": %.3g}",
                    first ? "" : ",", p->id, p->cause, p->a, p->b, ta, tb, ok ? "ok" : "FAIL", w);
            first = false;
            failed += !ok;
            p->teardown();
        }
        fprintf(f, "\n]}\n");
        fclose(f);
    } else if (mode == "--record") {
        if (argc < 3) { fprintf(stderr, "--record needs a group\n"); return 2; }
        for (Pair* p : pairs) {
            if (strcmp(p->group, argv[2])) continue;
            p->setup(); p->run_a(); p->run_b(); CHECK(cudaDeviceSynchronize());  // warm-up
            std::string ra = std::string(p->id) + ".a", rb = std::string(p->id) + ".b";
            nvtxRangePushA("measure"); nvtxRangePushA(ra.c_str()); p->run_a(); CHECK(cudaDeviceSynchronize());
            nvtxRangePop(); nvtxRangePop();
            nvtxRangePushA("measure"); nvtxRangePushA(rb.c_str()); p->run_b(); CHECK(cudaDeviceSynchronize());
            nvtxRangePop(); nvtxRangePop();
            printf("recorded %s: %s, %s\n", p->id, p->a, p->b);
            p->teardown();
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]); return 2;
    }
    CHECK(cudaDeviceSynchronize());
    if (failed) printf("FAILED %d\n", failed); else printf("ok\n");
    return failed ? 1 : 0;
}
