// hopper_wgmma: C[M, N] = A[M, K] * B[K, N] with warpgroup MMA (wgmma.mma_async), f16 inputs,
// f32 accumulate, f32 output; A and B row-major __half, C row-major float (overwritten).
// Built ONLY for sm_90a (registry target "sm_90a"); on any other target the kernel traps.
//
// Launch: blockDim = (128, 1, 1) exactly (one warpgroup); grid = (ceil(N / BN), ceil(M / 64), 1);
// no dynamic shared memory (static: (64 + BN) * 64 * 2 bytes = 16 KiB for BN = 64, 24 KiB for
// BN = 128). Shape constraints: none; any M, N, K >= 0 (edge tiles are zero-padded in shared
// memory, stores guarded). Alignment: none required; A is copied with 16-byte vectors when
// K % 8 == 0 and A is 16-byte aligned, B likewise when N % 8 == 0 and B is 16-byte aligned.
//
// Per block: one 64 x BN tile of C. K advances 64 per stage: the block copies A[64 x 64] and B
// [64 x BN] into shared memory, then issues four wgmma m64nBNk16 (one per k16 slice), commits
// them as one group and waits for it before the next stage overwrites shared memory. Simple and
// synchronous (no TMA, no pipelining): correctness first.
//
// ---- Shared memory layout (no swizzle, "interleave" mode) ---------------------------------
// wgmma reads A (M x K) and B (N x K, i.e. B transposed) from shared memory through 64-bit
// descriptors. Both operands are kept "K-major" (transpose flags 0): the unit is the core matrix,
// 8 rows x 16 bytes (8 rows x 8 halves along K), stored as 128 contiguous bytes, row after row.
// A 64 x 64 stage of A is 8 x 8 core matrices; core matrix (i, j) (rows 8i.., k 8j..) sits at
// byte (i + 8 j) * 128, so element (m, k) is at half index
//     ((m / 8) + 8 * (k / 8)) * 64 + (m % 8) * 8 + (k % 8).
// B is stored the same way with n in place of m and BN / 8 core matrices per k column.
// This is CUTLASS's canonical K-major INTERLEAVE layout ((8, m), (8 halves, 2)) with strides
// ((16 B, SBO), (2 B, LBO)) (cute/atom/mma_traits_sm90_gmma.hpp, make_gmma_desc<Major::K>):
//   LBO ("leading dimension byte offset") = distance between core matrices adjacent in K
//        = 8 * 128 = 1024 bytes for A, (BN / 8) * 128 bytes for B;
//   SBO ("stride dimension byte offset")  = distance between core matrices adjacent in M (N)
//        = 128 bytes.
// One k16 instruction consumes the 2 core-matrix columns j = 2s, 2s + 1 of slice s, so slice s
// starts at byte 2 s * LBO from the tile base.
//
// Descriptor bits (PTX ISA "Matrix Descriptor Format" for wgmma):
//   [0, 14)  start address >> 4 (shared-window address)   [16, 30) LBO >> 4
//   [32, 46) SBO >> 4                                      [49, 52) base offset (0: no swizzle)
//   [62, 64) swizzle mode: 0 = none (interleave), 1 = 128 B, 2 = 64 B, 3 = 32 B
//
// ---- Accumulator layout (PTX ISA "wgmma ... Matrix D" for m64nNk16, CUTLASS CLayout_64xN) -----
// Warp w (0..3) of the warpgroup owns rows 16 w .. 16 w + 15. With g = lane / 4 and t = lane % 4,
// register d[4 j + v] holds
//     row 16 w + g + 8 * (v / 2),  column 8 j + 2 t + (v % 2),   for j in [0, N / 8), v in [0, 4).
//
// ---- Ordering --------------------------------------------------------------------------------
// Shared memory written with ordinary stores is made visible to the async proxy that wgmma reads
// through with fence.proxy.async.shared::cta, then __syncthreads(). wgmma.fence orders the
// accumulator registers before the first wgmma; commit_group + wait_group 0 complete the stage.
#include "common.cuh"

namespace kiln {

constexpr int kWgmmaThreads = 128;  // one warpgroup

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

// One wgmma.mma_async m64nNk16, f32 += f16 * f16, A and B from shared memory, both K-major.
// Operands after the descriptors: scale-d = 1 (accumulate into d), scale-a = scale-b = 1 (no
// negation), transpose-a = transpose-b = 0 (K-major).
template <int BN>
struct WgmmaM64;

template <>
struct WgmmaM64<64> {
  __device__ __forceinline__ static void mma(float (&d)[32], unsigned long long desc_a,
                                             unsigned long long desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29,"
        "%30, %31"
        "}, "
        "%32, %33, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b)
        : "memory");
  }
};

template <>
struct WgmmaM64<128> {
  __device__ __forceinline__ static void mma(float (&d)[64], unsigned long long desc_a,
                                             unsigned long long desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29,"
        "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43,"
        "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57,"
        "%58, %59, %60, %61, %62, %63"
        "}, "
        "%64, %65, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63])
        : "l"(desc_a), "l"(desc_b)
        : "memory");
  }
};

__device__ __forceinline__ unsigned long long wgmma_smem_desc(const void* smem, unsigned lbo_bytes,
                                                              unsigned sbo_bytes) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  unsigned long long desc = (addr & 0x3FFFFu) >> 4;
  desc |= static_cast<unsigned long long>((lbo_bytes >> 4) & 0x3FFFu) << 16;
  desc |= static_cast<unsigned long long>((sbo_bytes >> 4) & 0x3FFFu) << 32;
  return desc;  // base offset 0, swizzle mode 0 (none)
}

// Keeps the compiler from moving accesses to an accumulator register across the asynchronous
// wgmma window (same idea as CUTLASS's warpgroup_fence_operand).
__device__ __forceinline__ void wgmma_fence_operand(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

#endif  // sm_90a

template <int BN>
__global__ void __launch_bounds__(kWgmmaThreads)
    hopper_wgmma_gemm_kernel(int M, int N, int K, const __half* A, const __half* B, float* C) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(BN % 64 == 0 && BN <= 128, "BN must be 64 or 128");
  constexpr int BM = 64;      // one wgmma M
  constexpr int BK = 64;      // K per shared-memory stage: four k16 instructions
  constexpr int KB = BK / 8;  // core matrices along K per stage
  constexpr unsigned kCoreBytes = 128;
  constexpr unsigned kLboA = (BM / 8) * kCoreBytes;
  constexpr unsigned kLboB = (BN / 8) * kCoreBytes;
  constexpr unsigned kSbo = kCoreBytes;

  __shared__ __align__(128) __half As[BM * BK];
  __shared__ __align__(128) __half Bs[BN * BK];

  const int tid = static_cast<int>(threadIdx.x);
  const int block_row = static_cast<int>(blockIdx.y) * BM;
  const int block_col = static_cast<int>(blockIdx.x) * BN;
  const bool vec_a = (K % 8 == 0) && (reinterpret_cast<unsigned long long>(A) % 16 == 0);
  const bool vec_b = (N % 8 == 0) && (reinterpret_cast<unsigned long long>(B) % 16 == 0);
  const __half zero = __float2half_rn(0.0f);

  float d[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    // A: each 8-half chunk along K of one row is exactly one 16-byte core-matrix row.
    for (int e = tid; e < BM * KB; e += kWgmmaThreads) {
      const int m = e / KB;
      const int kc = e % KB;
      const int gr = block_row + m;
      const int gc = k0 + 8 * kc;
      __half* dst = &As[((m / 8) + (BM / 8) * kc) * 64 + (m % 8) * 8];
      if (vec_a) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (gr < M && gc < K)  // K % 8 == 0: the whole vector is in range
          v = *reinterpret_cast<const uint4*>(A + static_cast<long long>(gr) * K + gc);
        *reinterpret_cast<uint4*>(dst) = v;
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i)
          dst[i] = (gr < M && gc + i < K) ? A[static_cast<long long>(gr) * K + gc + i] : zero;
      }
    }
    // B: read 8 consecutive n of one k row (coalesced), scatter them transposed into N x K core
    // matrices: element (n, k) at ((n / 8) + (BN / 8) * (k / 8)) * 64 + (n % 8) * 8 + (k % 8).
    for (int e = tid; e < BK * (BN / 8); e += kWgmmaThreads) {
      const int k = e / (BN / 8);
      const int nc = e % (BN / 8);
      const int gr = k0 + k;
      const int gc = block_col + 8 * nc;
      __half v[8];
      if (vec_b) {
        uint4 raw = make_uint4(0u, 0u, 0u, 0u);
        if (gr < K && gc < N)  // N % 8 == 0: the whole vector is in range
          raw = *reinterpret_cast<const uint4*>(B + static_cast<long long>(gr) * N + gc);
        const __half* h = reinterpret_cast<const __half*>(&raw);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = h[i];
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i)
          v[i] = (gr < K && gc + i < N) ? B[static_cast<long long>(gr) * N + gc + i] : zero;
      }
      __half* dst = &Bs[(nc + (BN / 8) * (k / 8)) * 64 + (k % 8)];
#pragma unroll
      for (int i = 0; i < 8; ++i) dst[i * 8] = v[i];
    }
    // Generic-proxy stores -> visible to the async proxy, then to the whole warpgroup.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();

#pragma unroll
    for (int i = 0; i < BN / 2; ++i) wgmma_fence_operand(d[i]);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < BK / 16; ++s) {
      const unsigned long long desc_a =
          wgmma_smem_desc(reinterpret_cast<const char*>(As) + 2 * s * kLboA, kLboA, kSbo);
      const unsigned long long desc_b =
          wgmma_smem_desc(reinterpret_cast<const char*>(Bs) + 2 * s * kLboB, kLboB, kSbo);
      WgmmaM64<BN>::mma(d, desc_a, desc_b);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) wgmma_fence_operand(d[i]);
    __syncthreads();  // every warp's wgmma has finished reading this stage
  }

  // Accumulator layout: see the top of the file.
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int r = block_row + 16 * warp + g + 8 * (v / 2);
      const int c = block_col + 8 * j + 2 * t + (v % 2);
      if (r < M && c < N) C[static_cast<long long>(r) * N + c] = d[4 * j + v];
    }
  }
#else
  // wgmma exists only on sm_90a; the registry never builds this kernel for another target.
  __trap();
#endif
}

}  // namespace kiln
