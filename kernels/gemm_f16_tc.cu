// gemm_f16_tc: C[M, N] = A[M, K] * B[K, N] on tensor cores; A and B row-major __half, C row-major
// float (f32 accumulate, f32 output; no alpha/beta, C is overwritten). Needs sm_80 or newer
// (mma.sync.m16n8k16); on older targets the kernel traps.
//
// Launch: blockDim = (256, 1, 1) exactly; grid = (ceil(N / BN), ceil(M / BM), 1); no dynamic
// shared memory (static: (BM * 40 + 32 * (BN + 8)) * 2 bytes, at most 19 KiB).
// Shape constraints: none. Any M, N, K >= 0 works (edge tiles are zero-padded, stores guarded).
// Alignment: none required. When K % 8 == 0 and A is 16-byte aligned, A tiles are loaded with
// 16-byte vectors; likewise B when N % 8 == 0 and B is 16-byte aligned; otherwise element by
// element (correct, slower). C must not overlap A or B.
//
// Work split: the block's BM x BN tile is split among 8 warps as 2 (M) x 4 (N), so each warp owns
// a (BM/2) x (BN/4) sub-tile made of 16 x 8 mma tiles. K advances 32 per shared-memory stage,
// two k16 mma steps per stage.
//
// Fragment layouts of mma.m16n8k16.row.col (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// g = lane / 4 and t = lane % 4; each 32-bit register holds two f16, lower index in the low half:
//   A (16 x 16, row-major):  a0 = A[g][2t..2t+1]     a1 = A[g+8][2t..2t+1]
//                            a2 = A[g][2t+8..2t+9]   a3 = A[g+8][2t+8..2t+9]
//   B (16 x 8, "col"):       b0 = B[2t..2t+1][g]     b1 = B[2t+8..2t+9][g]     (pairs along k)
//   C (16 x 8, f32):         c0 = C[g][2t]  c1 = C[g][2t+1]  c2 = C[g+8][2t]  c3 = C[g+8][2t+1]
#include "common.cuh"

namespace kiln {

constexpr int kGemmF16TcThreads = 256;

__device__ __forceinline__ unsigned pack_half2(__half lo, __half hi) {
  return static_cast<unsigned>(__half_as_ushort(lo)) |
         (static_cast<unsigned>(__half_as_ushort(hi)) << 16);
}

template <int BM, int BN>
__global__ void __launch_bounds__(kGemmF16TcThreads)
    gemm_f16_tc_kernel(int M, int N, int K, const __half* A, const __half* B, float* C) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BK = 32;
  constexpr int WM = BM / 2;  // warp tile rows
  constexpr int WN = BN / 4;  // warp tile columns
  constexpr int MT = WM / 16;
  constexpr int NT = WN / 8;
  static_assert(BM % 32 == 0 && BN % 32 == 0, "BM and BN must be multiples of 32");
  // Row padding of 8 halves keeps rows 16-byte aligned and puts the 8 rows a warp touches per
  // fragment load into distinct banks.
  constexpr int A_STRIDE = BK + 8;
  constexpr int B_STRIDE = BN + 8;

  __shared__ __align__(16) __half As[BM * A_STRIDE];
  __shared__ __align__(16) __half Bs[BK * B_STRIDE];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int warp_row = (warp / 4) * WM;
  const int warp_col = (warp % 4) * WN;
  const int block_row = static_cast<int>(blockIdx.y) * BM;
  const int block_col = static_cast<int>(blockIdx.x) * BN;

  const bool vec_a = (K % 8 == 0) && (reinterpret_cast<unsigned long long>(A) % 16 == 0);
  const bool vec_b = (N % 8 == 0) && (reinterpret_cast<unsigned long long>(B) % 16 == 0);
  const __half zero = __float2half_rn(0.0f);

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    // ---- stage A tile (BM x BK) and B tile (BK x BN) into shared memory, zero-padded.
    if (vec_a) {
      for (int e = tid; e < BM * BK / 8; e += kGemmF16TcThreads) {
        const int r = e / (BK / 8);
        const int c = (e % (BK / 8)) * 8;
        const int gr = block_row + r;
        const int gc = k0 + c;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (gr < M && gc < K)  // K % 8 == 0: the whole vector is in range
          v = *reinterpret_cast<const uint4*>(A + static_cast<long long>(gr) * K + gc);
        *reinterpret_cast<uint4*>(&As[r * A_STRIDE + c]) = v;
      }
    } else {
      for (int e = tid; e < BM * BK; e += kGemmF16TcThreads) {
        const int r = e / BK;
        const int c = e % BK;
        const int gr = block_row + r;
        const int gc = k0 + c;
        As[r * A_STRIDE + c] = (gr < M && gc < K) ? A[static_cast<long long>(gr) * K + gc] : zero;
      }
    }
    if (vec_b) {
      for (int e = tid; e < BK * BN / 8; e += kGemmF16TcThreads) {
        const int r = e / (BN / 8);
        const int c = (e % (BN / 8)) * 8;
        const int gr = k0 + r;
        const int gc = block_col + c;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (gr < K && gc < N)  // N % 8 == 0: the whole vector is in range
          v = *reinterpret_cast<const uint4*>(B + static_cast<long long>(gr) * N + gc);
        *reinterpret_cast<uint4*>(&Bs[r * B_STRIDE + c]) = v;
      }
    } else {
      for (int e = tid; e < BK * BN; e += kGemmF16TcThreads) {
        const int r = e / BN;
        const int c = e % BN;
        const int gr = k0 + r;
        const int gc = block_col + c;
        Bs[r * B_STRIDE + c] = (gr < K && gc < N) ? B[static_cast<long long>(gr) * N + gc] : zero;
      }
    }
    __syncthreads();

    // ---- two k16 steps of mma on the staged tiles.
#pragma unroll
    for (int ks = 0; ks < BK; ks += 16) {
      unsigned a[MT][4];
      unsigned b[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const __half* base = &As[(warp_row + 16 * i + g) * A_STRIDE + ks + 2 * t];
        a[i][0] = *reinterpret_cast<const unsigned*>(base);
        a[i][1] = *reinterpret_cast<const unsigned*>(base + 8 * A_STRIDE);
        a[i][2] = *reinterpret_cast<const unsigned*>(base + 8);
        a[i][3] = *reinterpret_cast<const unsigned*>(base + 8 * A_STRIDE + 8);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const __half* base = &Bs[(ks + 2 * t) * B_STRIDE + warp_col + 8 * j + g];
        b[j][0] = pack_half2(base[0], base[B_STRIDE]);
        b[j][1] = pack_half2(base[8 * B_STRIDE], base[9 * B_STRIDE]);
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
              "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
              : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
              : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
    }
    __syncthreads();
  }

  // ---- write the accumulators (layout of C above), guarded at the edges.
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int half_rows = 0; half_rows < 2; ++half_rows) {
      const int r = block_row + warp_row + 16 * i + g + 8 * half_rows;
      if (r >= M) continue;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int c = block_col + warp_col + 8 * j + 2 * t;
        float* out = C + static_cast<long long>(r) * N + c;
        if (c < N) out[0] = acc[i][j][2 * half_rows];
        if (c + 1 < N) out[1] = acc[i][j][2 * half_rows + 1];
      }
    }
  }
#else
  // mma.sync.m16n8k16 needs sm_80; the registry never builds this kernel for older targets.
  __trap();
#endif
}

}  // namespace kiln
