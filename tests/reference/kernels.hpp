// CPU references for every kernel family in kernels/, one function per family. They take and
// return float vectors: a test of an f16/bf16 kernel rounds its inputs to that precision first
// (round_to_f16 / round_to_bf16 in numerics.hpp), feeds the same values to both sides, and rounds
// the reference output the way the kernel stores it. Accumulation is in double, so a reference is
// at least as accurate as the float-accumulating kernel it checks. All matrices are row-major.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "numerics.hpp"

namespace kiln::ref {

// axpy: y = alpha * x + y.
inline void axpy(std::vector<float>& y, float alpha, const std::vector<float>& x) {
  for (std::size_t i = 0; i < y.size() && i < x.size(); ++i)
    y[i] = static_cast<float>(static_cast<double>(alpha) * x[i] + y[i]);
}

// reduce_sum (reduce_sum_partial + reduce_sum_final): the sum of all elements.
inline float reduce_sum(const std::vector<float>& x) {
  double acc = 0.0;
  for (float v : x) acc += v;
  return static_cast<float>(acc);
}

// rmsnorm: out[r, c] = in[r, c] * w[c] / sqrt(mean_c(in[r, :]^2) + eps).
inline void rmsnorm(std::vector<float>& out, const std::vector<float>& in,
                    const std::vector<float>& w, int rows, int cols, float eps) {
  out.assign(static_cast<std::size_t>(rows) * cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * cols;
    double sum_sq = 0.0;
    for (int c = 0; c < cols; ++c) sum_sq += static_cast<double>(in[base + c]) * in[base + c];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / cols + eps);
    for (int c = 0; c < cols; ++c)
      out[base + c] = static_cast<float>(in[base + c] * inv_rms * w[c]);
  }
}

// softmax: row-wise, out[r, c] = exp(in[r, c] - max_r) / sum_c exp(in[r, c] - max_r).
inline void softmax(std::vector<float>& out, const std::vector<float>& in, int rows, int cols) {
  out.assign(static_cast<std::size_t>(rows) * cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * cols;
    double mx = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < cols; ++c) mx = std::fmax(mx, in[base + c]);
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) sum += std::exp(in[base + c] - mx);
    for (int c = 0; c < cols; ++c)
      out[base + c] = static_cast<float>(std::exp(in[base + c] - mx) / sum);
  }
}

// silu_and_mul: in is [rows, 2d]; out[r, i] = silu(in[r, i]) * in[r, d + i],
// silu(x) = x / (1 + exp(-x)).
inline void silu_and_mul(std::vector<float>& out, const std::vector<float>& in, long long rows,
                         int d) {
  out.assign(static_cast<std::size_t>(rows) * d, 0.0f);
  for (long long r = 0; r < rows; ++r) {
    for (int i = 0; i < d; ++i) {
      const double g = in[static_cast<std::size_t>(r) * 2 * d + i];
      const double u = in[static_cast<std::size_t>(r) * 2 * d + d + i];
      out[static_cast<std::size_t>(r) * d + i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  }
}

// gemm_f32: C[M, N] = A[M, K] * B[K, N].
inline void gemm_f32(std::vector<float>& C, const std::vector<float>& A,
                     const std::vector<float>& B, int M, int N, int K) {
  C.assign(static_cast<std::size_t>(M) * N, 0.0f);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int k = 0; k < K; ++k)
        acc += static_cast<double>(A[static_cast<std::size_t>(m) * K + k]) *
               B[static_cast<std::size_t>(k) * N + n];
      C[static_cast<std::size_t>(m) * N + n] = static_cast<float>(acc);
    }
}

// gemm_f16_tc: the kernel reads A and B as f16 and writes f32, so the reference rounds its
// inputs to f16 (a no-op when the caller already did) and multiplies exactly.
inline void gemm_f16_tc(std::vector<float>& C, std::vector<float> A, std::vector<float> B, int M,
                        int N, int K) {
  round_to_f16(A);
  round_to_f16(B);
  gemm_f32(C, A, B, M, N, K);
}

// hopper_wgmma: same contract as gemm_f16_tc (f16 in, f32 out), computed on sm_90a with wgmma.
inline void hopper_wgmma_gemm(std::vector<float>& C, const std::vector<float>& A,
                              const std::vector<float>& B, int M, int N, int K) {
  gemm_f16_tc(C, A, B, M, N, K);
}

}  // namespace kiln::ref
