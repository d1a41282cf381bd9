// One tiny kernel, profiled once by plain ncu (benchmarks/ncu_warm/record.sh) into profctl/tools/ncu_warm.ncu-rep:
// a report that exists only so that profctl can make ncu_report do its one-time start while ncu runs.
#include <cuda_runtime.h>

__global__ void warm(float* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    x[i] = x[i] * 2.0f + 1.0f;
}

int main() {
    float* x = nullptr;
    cudaMalloc(&x, 256 * sizeof(float));
    cudaMemset(x, 0, 256 * sizeof(float));
    warm<<<1, 256>>>(x);
    cudaDeviceSynchronize();
    cudaFree(x);
    return 0;
}
