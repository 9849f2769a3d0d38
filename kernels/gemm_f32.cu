// gemm_f32: C[M, N] = A[M, K] * B[K, N], all row-major float (no alpha/beta; C is overwritten).
//
// Launch: blockDim = (256, 1, 1) exactly; grid = (ceil(N / BN), ceil(M / BM), 1); no dynamic
// shared memory (static: (BM + BN) * BK * 4 bytes, at most 8 KiB). Any M, N, K >= 0 (tiles are
// zero-padded at the edges); no alignment requirement beyond float. C must not overlap A or B.
//
// Each block computes a BM x BN tile of C, staging BM x BK of A and BK x BN of B in shared memory
// per step. The 256 threads form a 16 x 16 grid; thread (ty, tx) owns the (BM/16) x (BN/16)
// outputs at rows ty + 16 i and columns tx + 16 j. That interleaving keeps shared-memory reads of
// B conflict-free (consecutive tx read consecutive columns) and makes C stores coalesced.
namespace kiln {

constexpr int kGemmF32Threads = 256;

template <int BM, int BN, int BK>
__global__ void __launch_bounds__(kGemmF32Threads)
    gemm_f32_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
  static_assert(BM % 16 == 0 && BN % 16 == 0, "BM and BN must be multiples of 16");
  static_assert((BM * BK) % kGemmF32Threads == 0 && (BK * BN) % kGemmF32Threads == 0,
                "tile loads must divide evenly among the threads");
  constexpr int TM = BM / 16;  // rows per thread
  constexpr int TN = BN / 16;  // columns per thread

  // A is stored transposed (k-major) so that a thread's TM values of one k are one row.
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];

  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % 16;
  const int ty = tid / 16;
  const int block_row = static_cast<int>(blockIdx.y) * BM;
  const int block_col = static_cast<int>(blockIdx.x) * BN;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int it = 0; it < BM * BK / kGemmF32Threads; ++it) {
      const int e = tid + it * kGemmF32Threads;
      const int r = e / BK;
      const int c = e % BK;
      const int gr = block_row + r;
      const int gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? A[static_cast<long long>(gr) * K + gc] : 0.0f;
    }
#pragma unroll
    for (int it = 0; it < BK * BN / kGemmF32Threads; ++it) {
      const int e = tid + it * kGemmF32Threads;
      const int r = e / BN;
      const int c = e % BN;
      const int gr = k0 + r;
      const int gc = block_col + c;
      Bs[r][c] = (gr < K && gc < N) ? B[static_cast<long long>(gr) * N + gc] : 0.0f;
    }
    __syncthreads();

#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM];
      float b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = block_row + ty + 16 * i;
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = block_col + tx + 16 * j;
      if (c < N) C[static_cast<long long>(r) * N + c] = acc[i][j];
    }
  }
}

}  // namespace kiln
