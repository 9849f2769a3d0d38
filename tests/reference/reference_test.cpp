// The CPU references that GPU tests trust must themselves be right: each is checked here against
// small cases worked out by hand, and the f16/bf16 rounding against known bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference/kernels.hpp"
#include "reference/numerics.hpp"

namespace {

using kiln::ref::bf16_bits_from_float;
using kiln::ref::f16_bits_from_float;
using kiln::ref::float_from_bf16_bits;
using kiln::ref::float_from_f16_bits;
using kiln::ref::rel_l2;
using kiln::ref::round_to_bf16;
using kiln::ref::round_to_f16;

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- f16 ---------------------------------------------------------------------------------------

TEST(F16Rounding, OneThirdRoundsToNearestRepresentable) {
  EXPECT_EQ(f16_bits_from_float(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(round_to_f16(1.0f / 3.0f), 0.333251953125f);
}

TEST(F16Rounding, ExactValuesKeepTheirBits) {
  EXPECT_EQ(f16_bits_from_float(1.0f), 0x3c00);
  EXPECT_EQ(f16_bits_from_float(-2.0f), 0xc000);
  EXPECT_EQ(f16_bits_from_float(0.5f), 0x3800);
  EXPECT_EQ(f16_bits_from_float(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
}

TEST(F16Rounding, LargestFiniteAndOverflowToInfinity) {
  EXPECT_EQ(f16_bits_from_float(65504.0f), 0x7bff);
  EXPECT_EQ(round_to_f16(65504.0f), 65504.0f);
  EXPECT_EQ(f16_bits_from_float(65519.0f), 0x7bff);  // below the halfway point
  EXPECT_EQ(f16_bits_from_float(65520.0f), 0x7c00);  // halfway, ties to even: infinity
  EXPECT_EQ(f16_bits_from_float(1.0e6f), 0x7c00);
  EXPECT_EQ(f16_bits_from_float(-1.0e6f), 0xfc00);
  EXPECT_EQ(round_to_f16(kInf), kInf);
  EXPECT_EQ(round_to_f16(-kInf), -kInf);
}

TEST(F16Rounding, SubnormalsRoundToNearestEven) {
  const float step = std::ldexp(1.0f, -24);  // smallest f16 subnormal
  EXPECT_EQ(f16_bits_from_float(step), 0x0001);
  EXPECT_EQ(round_to_f16(step), step);
  EXPECT_EQ(f16_bits_from_float(0.5f * step), 0x0000);     // tie between 0 and 1 step: even (0)
  EXPECT_EQ(f16_bits_from_float(0.75f * step), 0x0001);    // above the tie
  EXPECT_EQ(f16_bits_from_float(1.5f * step), 0x0002);     // tie between 1 and 2 steps: even (2)
  EXPECT_EQ(f16_bits_from_float(2.5f * step), 0x0002);     // tie between 2 and 3 steps: even (2)
  EXPECT_EQ(f16_bits_from_float(0x3ff * step), 0x03ff);    // largest subnormal
  EXPECT_EQ(f16_bits_from_float(1023.5f * step), 0x0400);  // rounds up into the normals
  EXPECT_EQ(f16_bits_from_float(-3.0f * step), 0x8003);
  EXPECT_EQ(float_from_f16_bits(0x0001), step);
  EXPECT_EQ(float_from_f16_bits(0x83ff), -1023.0f * step);
}

TEST(F16Rounding, SignedZeroAndTinyValues) {
  EXPECT_EQ(f16_bits_from_float(0.0f), 0x0000);
  EXPECT_EQ(f16_bits_from_float(-0.0f), 0x8000);
  EXPECT_EQ(f16_bits_from_float(1.0e-10f), 0x0000);
  EXPECT_EQ(f16_bits_from_float(-1.0e-10f), 0x8000);
  EXPECT_EQ(f16_bits_from_float(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(std::signbit(round_to_f16(-0.0f)));
}

TEST(F16Rounding, NaNStaysNaN) {
  const std::uint16_t h = f16_bits_from_float(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(round_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(float_from_f16_bits(0x7e00)));
  EXPECT_TRUE(std::isnan(float_from_f16_bits(0xfc01)));
}

TEST(F16Rounding, MantissaTiesGoToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even mantissa (1.0) wins.
  EXPECT_EQ(f16_bits_from_float(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(f16_bits_from_float(1.0f + 3.0f * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above a tie rounds up.
  EXPECT_EQ(f16_bits_from_float(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
}

TEST(F16Rounding, EveryF16ValueRoundTrips) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = float_from_f16_bits(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f16_bits_from_float(f), bits) << "bits 0x" << std::hex << h;
  }
}

// ---- bf16 --------------------------------------------------------------------------------------

TEST(Bf16Rounding, OneThirdRoundsToNearestRepresentable) {
  EXPECT_EQ(bf16_bits_from_float(1.0f / 3.0f), 0x3eab);
  EXPECT_EQ(round_to_bf16(1.0f / 3.0f), 0.333984375f);
}

TEST(Bf16Rounding, MantissaTiesGoToEven) {
  EXPECT_EQ(bf16_bits_from_float(1.0f + std::ldexp(1.0f, -8)), 0x3f80);         // tie, to 1.0
  EXPECT_EQ(bf16_bits_from_float(1.0f + 3.0f * std::ldexp(1.0f, -8)), 0x3f82);  // tie, up
  EXPECT_EQ(round_to_bf16(1.0f + 3.0f * std::ldexp(1.0f, -8)), 1.015625f);
}

TEST(Bf16Rounding, F16LimitIsNotABf16Value) {
  EXPECT_EQ(bf16_bits_from_float(65504.0f), 0x4780);
  EXPECT_EQ(round_to_bf16(65504.0f), 65536.0f);
}

TEST(Bf16Rounding, OverflowInfinityAndLargestFinite) {
  EXPECT_EQ(bf16_bits_from_float(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16_bits_from_float(kInf), 0x7f80);
  EXPECT_EQ(bf16_bits_from_float(-kInf), 0xff80);
  EXPECT_EQ(float_from_bf16_bits(0x7f7f), 3.38953139e38f);
}

TEST(Bf16Rounding, SubnormalsAndZero) {
  EXPECT_EQ(bf16_bits_from_float(std::ldexp(1.0f, -126)), 0x0080);  // smallest normal
  EXPECT_EQ(bf16_bits_from_float(std::ldexp(1.0f, -133)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(round_to_bf16(std::ldexp(1.0f, -133)), std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16_bits_from_float(std::ldexp(1.0f, -134)), 0x0000);         // tie: even (0)
  EXPECT_EQ(bf16_bits_from_float(3.0f * std::ldexp(1.0f, -134)), 0x0002);  // tie: even (2)
  EXPECT_EQ(bf16_bits_from_float(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(bf16_bits_from_float(-0.0f), 0x8000);
}

TEST(Bf16Rounding, NaNStaysNaN) {
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A signalling NaN whose payload sits only in the low 16 bits must not truncate to infinity.
  const float low_payload_nan = kiln::ref::bits_float(0x7f800001u);
  ASSERT_TRUE(std::isnan(low_payload_nan));
  EXPECT_TRUE(std::isnan(round_to_bf16(low_payload_nan)));
}

// ---- rel_l2 ------------------------------------------------------------------------------------

TEST(RelL2, IdenticalVectorsHaveZeroError) {
  EXPECT_EQ(rel_l2({1.0f, -2.0f, 3.0f}, {1.0f, -2.0f, 3.0f}), 0.0);
}

TEST(RelL2, KnownError) {
  // ||(0, 0.5)|| / ||(3, 4)|| = 0.5 / 5.
  EXPECT_DOUBLE_EQ(rel_l2({3.0f, 4.5f}, {3.0f, 4.0f}), 0.1);
}

TEST(RelL2, ZeroReferenceGivesAbsoluteError) {
  EXPECT_EQ(rel_l2({0.0f, 0.0f}, {0.0f, 0.0f}), 0.0);
  EXPECT_DOUBLE_EQ(rel_l2({3.0f, 4.0f}, {0.0f, 0.0f}), 5.0);
}

TEST(RelL2, SizeMismatchAndNaNNeverPass) {
  EXPECT_FALSE(rel_l2({1.0f}, {1.0f, 2.0f}) < 1.0);
  EXPECT_FALSE(rel_l2({std::numeric_limits<float>::quiet_NaN()}, {1.0f}) < 1.0);
}

// ---- families ----------------------------------------------------------------------------------

TEST(AxpyReference, ScalesAndAdds) {
  std::vector<float> y = {1.0f, 2.0f, -1.0f};
  kiln::ref::axpy(y, 2.0f, {3.0f, 4.0f, 0.5f});
  EXPECT_EQ(y, (std::vector<float>{7.0f, 10.0f, 0.0f}));
}

TEST(ReduceSumReference, SumsOneToHundred) {
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = static_cast<float>(i + 1);
  EXPECT_EQ(kiln::ref::reduce_sum(x), 5050.0f);
}

TEST(ReduceSumReference, EmptyInputSumsToZero) { EXPECT_EQ(kiln::ref::reduce_sum({}), 0.0f); }

TEST(ReduceSumReference, AccumulatesWithoutFloatCancellation) {
  // In float, 1e8 + 1 - 1e8 is 0; the double accumulator keeps the 1.
  EXPECT_EQ(kiln::ref::reduce_sum({1.0e8f, 1.0f, -1.0e8f}), 1.0f);
}

TEST(RmsnormReference, NormalisesAKnownRow) {
  // Row (3, 4): mean square 12.5, rms 3.5355339; weights (1, 2).
  std::vector<float> out;
  kiln::ref::rmsnorm(out, {3.0f, 4.0f}, {1.0f, 2.0f}, 1, 2, 0.0f);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NEAR(out[0], 3.0 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(out[1], 2.0 * 4.0 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(out[0], 0.84852814f, 1e-6);
  EXPECT_NEAR(out[1], 2.26274170f, 1e-6);
}

TEST(RmsnormReference, RowsAreIndependentAndEpsApplies) {
  // Row 0 is all ones (rms 1), row 1 is (2, 2, 2) (rms 2): both normalise to the weights.
  std::vector<float> out;
  kiln::ref::rmsnorm(out, {1, 1, 1, 2, 2, 2}, {0.5f, 1.0f, 2.0f}, 2, 3, 0.0f);
  EXPECT_EQ(out, (std::vector<float>{0.5f, 1.0f, 2.0f, 0.5f, 1.0f, 2.0f}));
  // eps enters under the square root: (2, 2) with eps 12 gives 2 / sqrt(4 + 12) = 0.5.
  kiln::ref::rmsnorm(out, {2.0f, 2.0f}, {1.0f, 1.0f}, 1, 2, 12.0f);
  EXPECT_NEAR(out[0], 0.5f, 1e-7);
  EXPECT_NEAR(out[1], 0.5f, 1e-7);
  // An all-zero row stays zero when eps > 0.
  kiln::ref::rmsnorm(out, {0.0f, 0.0f}, {1.0f, 1.0f}, 1, 2, 1e-6f);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f}));
}

TEST(SoftmaxReference, MatchesExpFormulaAndRowsSumToOne) {
  std::vector<float> out;
  const std::vector<float> in = {1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f};
  kiln::ref::softmax(out, in, 2, 3);
  const double denom = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(out[0], std::exp(1.0) / denom, 1e-7);
  EXPECT_NEAR(out[1], std::exp(2.0) / denom, 1e-7);
  EXPECT_NEAR(out[2], std::exp(3.0) / denom, 1e-7);
  EXPECT_NEAR(out[0], 0.09003057f, 1e-7);
  EXPECT_NEAR(out[2], 0.66524096f, 1e-7);
  for (int c = 3; c < 6; ++c) EXPECT_NEAR(out[c], 1.0f / 3.0f, 1e-7);
  for (int r = 0; r < 2; ++r) EXPECT_NEAR(out[3 * r] + out[3 * r + 1] + out[3 * r + 2], 1.0, 1e-6);
}

TEST(SoftmaxReference, LargeLogitsDoNotOverflow) {
  std::vector<float> out;
  kiln::ref::softmax(out, {1000.0f, 1000.0f, -kInf}, 1, 3);
  EXPECT_EQ(out, (std::vector<float>{0.5f, 0.5f, 0.0f}));
}

TEST(SiluAndMulReference, GatesTheSecondHalf) {
  // Row: gate (0, 1), up (2, 3). silu(0) = 0, silu(1) = 1 / (1 + e^-1) = 0.7310586.
  std::vector<float> out;
  kiln::ref::silu_and_mul(out, {0.0f, 1.0f, 2.0f, 3.0f, -1.0f, 4.0f, 1.0f, 1.0f}, 2, 2);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 3.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(out[1], 2.1931758f, 1e-6);
  EXPECT_NEAR(out[2], -1.0 / (1.0 + std::exp(1.0)), 1e-6);  // silu(-1) * 1
  EXPECT_NEAR(out[3], 4.0 / (1.0 + std::exp(-4.0)), 1e-6);  // silu(4) * 1
}

TEST(GemmReference, TwoByThreeTimesThreeByTwo) {
  // [1 2 3; 4 5 6] * [7 8; 9 10; 11 12] = [58 64; 139 154].
  std::vector<float> c;
  kiln::ref::gemm_f32(c, {1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}, 2, 2, 3);
  EXPECT_EQ(c, (std::vector<float>{58.0f, 64.0f, 139.0f, 154.0f}));
}

TEST(GemmReference, F16VariantsRoundInputsToHalf) {
  // 1/3 rounds to 0.333251953125 in f16, so 3 * (1/3) is 0.999755859375, not 1.
  std::vector<float> c;
  kiln::ref::gemm_f16_tc(c, {1.0f / 3.0f}, {3.0f}, 1, 1, 1);
  EXPECT_EQ(c[0], 0.999755859375f);
  std::vector<float> c2;
  kiln::ref::hopper_wgmma_gemm(c2, {1.0f / 3.0f, 2.0f}, {3.0f, 0.5f}, 1, 1, 2);
  EXPECT_EQ(c2[0], 1.999755859375f);
}

}  // namespace
