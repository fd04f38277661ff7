// Device code of the shim's test programs, built by nvcc into a cubin and a fatbin.
// The stand-in driver only reads their names; on a GPU they run for real.
extern "C" __global__ void gd_scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" __global__ void gd_axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

extern "C" __global__ void gd_reduce(const float* x, float* out, int n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < n; ++i) s += x[i];
    *out = s;
  }
}
