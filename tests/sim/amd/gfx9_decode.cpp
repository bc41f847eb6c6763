// The CDNA interpreter's decoder (gfx9_decode.hpp): the encodings' fields and the opcode
// tables of the subset, named as llvm-objdump-19 names them.
//
// Encodings and opcode numbers are those of the MI200 and MI300 ISA guides as LLVM's AMDGPU
// assembler encodes them (llvm-mc-19 -mcpu=gfx90a / -mcpu=gfx942 --show-encoding; the .td
// files' GFX9, GFX90A and GFX940 variants).
#include "gfx9_decode.hpp"

#include <fmt/format.h>

namespace rig::sim::amd::gfx9 {
namespace {

struct Name {
  std::uint32_t op;
  const char* name;
};

// The subset, by family and opcode (llvm-mc-19 -mcpu=gfx942 --show-encoding).
constexpr Name kSop1[] = {{0, "s_mov_b32"}, {1, "s_mov_b64"}, {4, "s_not_b32"}, {5, "s_not_b64"},
    {8, "s_brev_b32"}, {12, "s_bcnt1_i32_b32"}, {13, "s_bcnt1_i32_b64"}, {16, "s_ff1_i32_b32"},
    {17, "s_ff1_i32_b64"}, {18, "s_flbit_i32_b32"}, {19, "s_flbit_i32_b64"}, {22, "s_sext_i32_i8"},
    {23, "s_sext_i32_i16"}, {28, "s_getpc_b64"}, {29, "s_setpc_b64"}, {30, "s_swappc_b64"},
    {32, "s_and_saveexec_b64"}, {33, "s_or_saveexec_b64"}, {34, "s_xor_saveexec_b64"},
    {35, "s_andn2_saveexec_b64"}, {36, "s_orn2_saveexec_b64"}, {48, "s_abs_i32"}};
constexpr Name kSop2[] = {{0, "s_add_u32"}, {1, "s_sub_u32"}, {2, "s_add_i32"}, {3, "s_sub_i32"},
    {4, "s_addc_u32"}, {5, "s_subb_u32"}, {6, "s_min_i32"}, {7, "s_min_u32"}, {8, "s_max_i32"}, {9, "s_max_u32"},
    {10, "s_cselect_b32"}, {11, "s_cselect_b64"}, {12, "s_and_b32"}, {13, "s_and_b64"}, {14, "s_or_b32"},
    {15, "s_or_b64"}, {16, "s_xor_b32"}, {17, "s_xor_b64"}, {18, "s_andn2_b32"}, {19, "s_andn2_b64"},
    {20, "s_orn2_b32"}, {21, "s_orn2_b64"}, {28, "s_lshl_b32"}, {29, "s_lshl_b64"}, {30, "s_lshr_b32"},
    {31, "s_lshr_b64"}, {32, "s_ashr_i32"}, {33, "s_ashr_i64"}, {36, "s_mul_i32"}, {37, "s_bfe_u32"},
    {38, "s_bfe_i32"}, {39, "s_bfe_u64"}, {40, "s_bfe_i64"}, {44, "s_mul_hi_u32"}, {45, "s_mul_hi_i32"},
    {46, "s_lshl1_add_u32"}, {47, "s_lshl2_add_u32"}, {48, "s_lshl3_add_u32"}, {49, "s_lshl4_add_u32"},
    {50, "s_pack_ll_b32_b16"}};
constexpr Name kSopc[] = {{0, "s_cmp_eq_i32"}, {1, "s_cmp_lg_i32"}, {2, "s_cmp_gt_i32"}, {3, "s_cmp_ge_i32"},
    {4, "s_cmp_lt_i32"}, {5, "s_cmp_le_i32"}, {6, "s_cmp_eq_u32"}, {7, "s_cmp_lg_u32"}, {8, "s_cmp_gt_u32"},
    {9, "s_cmp_ge_u32"}, {10, "s_cmp_lt_u32"}, {11, "s_cmp_le_u32"}, {12, "s_bitcmp0_b32"},
    {13, "s_bitcmp1_b32"}, {18, "s_cmp_eq_u64"}, {19, "s_cmp_lg_u64"}};
constexpr Name kSopk[] = {{0, "s_movk_i32"}, {1, "s_cmovk_i32"}, {2, "s_cmpk_eq_i32"}, {3, "s_cmpk_lg_i32"},
    {4, "s_cmpk_gt_i32"}, {5, "s_cmpk_ge_i32"}, {6, "s_cmpk_lt_i32"}, {7, "s_cmpk_le_i32"}, {8, "s_cmpk_eq_u32"},
    {9, "s_cmpk_lg_u32"}, {10, "s_cmpk_gt_u32"}, {11, "s_cmpk_ge_u32"}, {12, "s_cmpk_lt_u32"},
    {13, "s_cmpk_le_u32"}, {14, "s_addk_i32"}, {15, "s_mulk_i32"}};
constexpr Name kSopp[] = {{0, "s_nop"}, {1, "s_endpgm"}, {2, "s_branch"}, {4, "s_cbranch_scc0"},
    {5, "s_cbranch_scc1"}, {6, "s_cbranch_vccz"}, {7, "s_cbranch_vccnz"}, {8, "s_cbranch_execz"},
    {9, "s_cbranch_execnz"}, {10, "s_barrier"}, {12, "s_waitcnt"}, {14, "s_sleep"}, {15, "s_setprio"}};
constexpr Name kSmem[] = {{0, "s_load_dword"}, {1, "s_load_dwordx2"}, {2, "s_load_dwordx4"},
    {3, "s_load_dwordx8"}, {4, "s_load_dwordx16"}};
constexpr Name kVop1[] = {{1, "v_mov_b32"}, {2, "v_readfirstlane_b32"}, {3, "v_cvt_i32_f64"},
    {4, "v_cvt_f64_i32"}, {5, "v_cvt_f32_i32"}, {6, "v_cvt_f32_u32"}, {7, "v_cvt_u32_f32"}, {8, "v_cvt_i32_f32"},
    {10, "v_cvt_f16_f32"}, {11, "v_cvt_f32_f16"}, {15, "v_cvt_f32_f64"}, {16, "v_cvt_f64_f32"},
    {17, "v_cvt_f32_ubyte0"}, {21, "v_cvt_u32_f64"}, {22, "v_cvt_f64_u32"}, {23, "v_trunc_f64"},
    {24, "v_ceil_f64"}, {25, "v_rndne_f64"}, {26, "v_floor_f64"}, {27, "v_fract_f32"}, {28, "v_trunc_f32"},
    {29, "v_ceil_f32"}, {30, "v_rndne_f32"}, {31, "v_floor_f32"}, {32, "v_exp_f32"}, {33, "v_log_f32"},
    {34, "v_rcp_f32"}, {35, "v_rcp_iflag_f32"}, {36, "v_rsq_f32"}, {37, "v_rcp_f64"}, {38, "v_rsq_f64"},
    {39, "v_sqrt_f32"}, {40, "v_sqrt_f64"}, {41, "v_sin_f32"}, {42, "v_cos_f32"}, {43, "v_not_b32"},
    {44, "v_bfrev_b32"}, {45, "v_ffbh_u32"},
    {46, "v_ffbl_b32"}, {47, "v_ffbh_i32"}, {48, "v_frexp_exp_i32_f64"}, {49, "v_frexp_mant_f64"},
    {50, "v_fract_f64"}, {51, "v_frexp_exp_i32_f32"}, {52, "v_frexp_mant_f32"}, {56, "v_mov_b64"},
    {57, "v_cvt_f16_u16"}, {59, "v_cvt_u16_f16"}, {62, "v_sqrt_f16"}};
constexpr Name kVop2[] = {{0, "v_cndmask_b32"}, {1, "v_add_f32"}, {2, "v_sub_f32"}, {3, "v_subrev_f32"},
    {4, "v_fmac_f64"}, {5, "v_mul_f32"}, {6, "v_mul_i32_i24"}, {7, "v_mul_hi_i32_i24"}, {8, "v_mul_u32_u24"},
    {9, "v_mul_hi_u32_u24"}, {10, "v_min_f32"}, {11, "v_max_f32"}, {12, "v_min_i32"}, {13, "v_max_i32"},
    {14, "v_min_u32"}, {15, "v_max_u32"}, {16, "v_lshrrev_b32"}, {17, "v_ashrrev_i32"}, {18, "v_lshlrev_b32"},
    {19, "v_and_b32"}, {20, "v_or_b32"}, {21, "v_xor_b32"}, {22, "v_mac_f32"}, {25, "v_add_co_u32"},
    {26, "v_sub_co_u32"}, {27, "v_subrev_co_u32"}, {28, "v_addc_co_u32"}, {29, "v_subb_co_u32"},
    {30, "v_subbrev_co_u32"}, {31, "v_add_f16"}, {32, "v_sub_f16"}, {34, "v_mul_f16"}, {38, "v_add_u16"},
    {39, "v_sub_u16"}, {41, "v_mul_lo_u16"}, {42, "v_lshlrev_b16"}, {43, "v_lshrrev_b16"}, {45, "v_max_f16"},
    {46, "v_min_f16"}, {47, "v_max_u16"}, {49, "v_min_u16"}, {52, "v_add_u32"}, {53, "v_sub_u32"},
    {54, "v_subrev_u32"}, {59, "v_fmac_f32"}};
constexpr Name kVopc[] = {{16, "v_cmp_class_f32"}, {17, "v_cmpx_class_f32"}, {18, "v_cmp_class_f64"},
    {19, "v_cmpx_class_f64"}, {20, "v_cmp_class_f16"}, {21, "v_cmpx_class_f16"}, {32, "v_cmp_f_f16"},
    {33, "v_cmp_lt_f16"}, {34, "v_cmp_eq_f16"}, {35, "v_cmp_le_f16"}, {36, "v_cmp_gt_f16"}, {37, "v_cmp_lg_f16"},
    {38, "v_cmp_ge_f16"}, {39, "v_cmp_o_f16"}, {40, "v_cmp_u_f16"}, {41, "v_cmp_nge_f16"}, {42, "v_cmp_nlg_f16"},
    {43, "v_cmp_ngt_f16"}, {44, "v_cmp_nle_f16"}, {45, "v_cmp_neq_f16"}, {46, "v_cmp_nlt_f16"},
    {47, "v_cmp_tru_f16"}, {48, "v_cmpx_f_f16"}, {49, "v_cmpx_lt_f16"}, {50, "v_cmpx_eq_f16"},
    {51, "v_cmpx_le_f16"}, {52, "v_cmpx_gt_f16"}, {53, "v_cmpx_lg_f16"}, {54, "v_cmpx_ge_f16"},
    {55, "v_cmpx_o_f16"}, {56, "v_cmpx_u_f16"}, {57, "v_cmpx_nge_f16"}, {58, "v_cmpx_nlg_f16"},
    {59, "v_cmpx_ngt_f16"}, {60, "v_cmpx_nle_f16"}, {61, "v_cmpx_neq_f16"}, {62, "v_cmpx_nlt_f16"},
    {63, "v_cmpx_tru_f16"}, {64, "v_cmp_f_f32"}, {65, "v_cmp_lt_f32"}, {66, "v_cmp_eq_f32"},
    {67, "v_cmp_le_f32"}, {68, "v_cmp_gt_f32"}, {69, "v_cmp_lg_f32"}, {70, "v_cmp_ge_f32"}, {71, "v_cmp_o_f32"},
    {72, "v_cmp_u_f32"}, {73, "v_cmp_nge_f32"}, {74, "v_cmp_nlg_f32"}, {75, "v_cmp_ngt_f32"},
    {76, "v_cmp_nle_f32"}, {77, "v_cmp_neq_f32"}, {78, "v_cmp_nlt_f32"}, {79, "v_cmp_tru_f32"},
    {80, "v_cmpx_f_f32"}, {81, "v_cmpx_lt_f32"}, {82, "v_cmpx_eq_f32"}, {83, "v_cmpx_le_f32"},
    {84, "v_cmpx_gt_f32"}, {85, "v_cmpx_lg_f32"}, {86, "v_cmpx_ge_f32"}, {87, "v_cmpx_o_f32"},
    {88, "v_cmpx_u_f32"}, {89, "v_cmpx_nge_f32"}, {90, "v_cmpx_nlg_f32"}, {91, "v_cmpx_ngt_f32"},
    {92, "v_cmpx_nle_f32"}, {93, "v_cmpx_neq_f32"}, {94, "v_cmpx_nlt_f32"}, {95, "v_cmpx_tru_f32"},
    {96, "v_cmp_f_f64"}, {97, "v_cmp_lt_f64"}, {98, "v_cmp_eq_f64"}, {99, "v_cmp_le_f64"}, {100, "v_cmp_gt_f64"},
    {101, "v_cmp_lg_f64"}, {102, "v_cmp_ge_f64"}, {103, "v_cmp_o_f64"}, {104, "v_cmp_u_f64"},
    {105, "v_cmp_nge_f64"}, {106, "v_cmp_nlg_f64"}, {107, "v_cmp_ngt_f64"}, {108, "v_cmp_nle_f64"},
    {109, "v_cmp_neq_f64"}, {110, "v_cmp_nlt_f64"}, {111, "v_cmp_tru_f64"}, {112, "v_cmpx_f_f64"},
    {113, "v_cmpx_lt_f64"}, {114, "v_cmpx_eq_f64"}, {115, "v_cmpx_le_f64"}, {116, "v_cmpx_gt_f64"},
    {117, "v_cmpx_lg_f64"}, {118, "v_cmpx_ge_f64"}, {119, "v_cmpx_o_f64"}, {120, "v_cmpx_u_f64"},
    {121, "v_cmpx_nge_f64"}, {122, "v_cmpx_nlg_f64"}, {123, "v_cmpx_ngt_f64"}, {124, "v_cmpx_nle_f64"},
    {125, "v_cmpx_neq_f64"}, {126, "v_cmpx_nlt_f64"}, {127, "v_cmpx_tru_f64"}, {160, "v_cmp_f_i16"},
    {161, "v_cmp_lt_i16"}, {162, "v_cmp_eq_i16"}, {163, "v_cmp_le_i16"}, {164, "v_cmp_gt_i16"},
    {165, "v_cmp_ne_i16"}, {166, "v_cmp_ge_i16"}, {167, "v_cmp_t_i16"}, {168, "v_cmp_f_u16"},
    {169, "v_cmp_lt_u16"}, {170, "v_cmp_eq_u16"}, {171, "v_cmp_le_u16"}, {172, "v_cmp_gt_u16"},
    {173, "v_cmp_ne_u16"}, {174, "v_cmp_ge_u16"}, {175, "v_cmp_t_u16"}, {176, "v_cmpx_f_i16"},
    {177, "v_cmpx_lt_i16"}, {178, "v_cmpx_eq_i16"}, {179, "v_cmpx_le_i16"}, {180, "v_cmpx_gt_i16"},
    {181, "v_cmpx_ne_i16"}, {182, "v_cmpx_ge_i16"}, {183, "v_cmpx_t_i16"}, {184, "v_cmpx_f_u16"},
    {185, "v_cmpx_lt_u16"}, {186, "v_cmpx_eq_u16"}, {187, "v_cmpx_le_u16"}, {188, "v_cmpx_gt_u16"},
    {189, "v_cmpx_ne_u16"}, {190, "v_cmpx_ge_u16"}, {191, "v_cmpx_t_u16"}, {192, "v_cmp_f_i32"},
    {193, "v_cmp_lt_i32"}, {194, "v_cmp_eq_i32"}, {195, "v_cmp_le_i32"}, {196, "v_cmp_gt_i32"},
    {197, "v_cmp_ne_i32"}, {198, "v_cmp_ge_i32"}, {199, "v_cmp_t_i32"}, {200, "v_cmp_f_u32"},
    {201, "v_cmp_lt_u32"}, {202, "v_cmp_eq_u32"}, {203, "v_cmp_le_u32"}, {204, "v_cmp_gt_u32"},
    {205, "v_cmp_ne_u32"}, {206, "v_cmp_ge_u32"}, {207, "v_cmp_t_u32"}, {208, "v_cmpx_f_i32"},
    {209, "v_cmpx_lt_i32"}, {210, "v_cmpx_eq_i32"}, {211, "v_cmpx_le_i32"}, {212, "v_cmpx_gt_i32"},
    {213, "v_cmpx_ne_i32"}, {214, "v_cmpx_ge_i32"}, {215, "v_cmpx_t_i32"}, {216, "v_cmpx_f_u32"},
    {217, "v_cmpx_lt_u32"}, {218, "v_cmpx_eq_u32"}, {219, "v_cmpx_le_u32"}, {220, "v_cmpx_gt_u32"},
    {221, "v_cmpx_ne_u32"}, {222, "v_cmpx_ge_u32"}, {223, "v_cmpx_t_u32"}, {224, "v_cmp_f_i64"},
    {225, "v_cmp_lt_i64"}, {226, "v_cmp_eq_i64"}, {227, "v_cmp_le_i64"}, {228, "v_cmp_gt_i64"},
    {229, "v_cmp_ne_i64"}, {230, "v_cmp_ge_i64"}, {231, "v_cmp_t_i64"}, {232, "v_cmp_f_u64"},
    {233, "v_cmp_lt_u64"}, {234, "v_cmp_eq_u64"}, {235, "v_cmp_le_u64"}, {236, "v_cmp_gt_u64"},
    {237, "v_cmp_ne_u64"}, {238, "v_cmp_ge_u64"}, {239, "v_cmp_t_u64"}, {240, "v_cmpx_f_i64"},
    {241, "v_cmpx_lt_i64"}, {242, "v_cmpx_eq_i64"}, {243, "v_cmpx_le_i64"}, {244, "v_cmpx_gt_i64"},
    {245, "v_cmpx_ne_i64"}, {246, "v_cmpx_ge_i64"}, {247, "v_cmpx_t_i64"}, {248, "v_cmpx_f_u64"},
    {249, "v_cmpx_lt_u64"}, {250, "v_cmpx_eq_u64"}, {251, "v_cmpx_le_u64"}, {252, "v_cmpx_gt_u64"},
    {253, "v_cmpx_ne_u64"}, {254, "v_cmpx_ge_u64"}, {255, "v_cmpx_t_u64"}};
constexpr Name kVop3[] = {{449, "v_mad_f32"}, {450, "v_mad_i32_i24"}, {451, "v_mad_u32_u24"}, {456, "v_bfe_u32"},
    {457, "v_bfe_i32"}, {458, "v_bfi_b32"}, {459, "v_fma_f32"}, {460, "v_fma_f64"}, {462, "v_alignbit_b32"},
    {464, "v_min3_f32"}, {465, "v_min3_i32"}, {466, "v_min3_u32"}, {467, "v_max3_f32"}, {468, "v_max3_i32"},
    {469, "v_max3_u32"}, {470, "v_med3_f32"}, {471, "v_med3_i32"}, {472, "v_med3_u32"}, {478, "v_div_fixup_f32"},
    {479, "v_div_fixup_f64"}, {480, "v_div_scale_f32"}, {481, "v_div_scale_f64"}, {482, "v_div_fmas_f32"},
    {483, "v_div_fmas_f64"}, {488, "v_mad_u64_u32"}, {489, "v_mad_i64_i32"}, {499, "v_xad_u32"},
    {509, "v_lshl_add_u32"}, {510, "v_add_lshl_u32"}, {511, "v_add3_u32"}, {512, "v_lshl_or_b32"},
    {513, "v_and_or_b32"}, {514, "v_or3_b32"}, {518, "v_fma_f16"}, {520, "v_lshl_add_u64"}, {640, "v_add_f64"},
    {641, "v_mul_f64"}, {642, "v_min_f64"}, {643, "v_max_f64"}, {644, "v_ldexp_f64"}, {645, "v_mul_lo_u32"},
    {646, "v_mul_hi_u32"}, {647, "v_mul_hi_i32"}, {648, "v_ldexp_f32"}, {649, "v_readlane_b32"},
    {650, "v_writelane_b32"}, {651, "v_bcnt_u32_b32"}, {652, "v_mbcnt_lo_u32_b32"}, {653, "v_mbcnt_hi_u32_b32"},
    {655, "v_lshlrev_b64"}, {656, "v_lshrrev_b64"}, {657, "v_ashrrev_i64"}, {672, "v_pack_b32_f16"}};
constexpr Name kDs[] = {{0, "ds_add_u32"}, {1, "ds_sub_u32"}, {5, "ds_min_i32"}, {6, "ds_max_i32"},
    {7, "ds_min_u32"}, {8, "ds_max_u32"}, {9, "ds_and_b32"}, {10, "ds_or_b32"}, {11, "ds_xor_b32"},
    {13, "ds_write_b32"}, {14, "ds_write2_b32"}, {15, "ds_write2st64_b32"}, {21, "ds_add_f32"},
    {30, "ds_write_b8"}, {31, "ds_write_b16"}, {32, "ds_add_rtn_u32"}, {33, "ds_sub_rtn_u32"},
    {39, "ds_min_rtn_u32"}, {40, "ds_max_rtn_u32"}, {41, "ds_and_rtn_b32"}, {42, "ds_or_rtn_b32"},
    {43, "ds_xor_rtn_b32"}, {45, "ds_wrxchg_rtn_b32"}, {48, "ds_cmpst_rtn_b32"}, {53, "ds_add_rtn_f32"},
    {54, "ds_read_b32"}, {55, "ds_read2_b32"}, {56, "ds_read2st64_b32"}, {57, "ds_read_i8"}, {58, "ds_read_u8"},
    {59, "ds_read_i16"}, {60, "ds_read_u16"}, {61, "ds_swizzle_b32"}, {62, "ds_permute_b32"},
    {63, "ds_bpermute_b32"}, {64, "ds_add_u64"}, {71, "ds_min_u64"}, {72, "ds_max_u64"}, {77, "ds_write_b64"},
    {78, "ds_write2_b64"}, {79, "ds_write2st64_b64"}, {92, "ds_add_f64"}, {96, "ds_add_rtn_u64"},
    {103, "ds_min_rtn_u64"}, {104, "ds_max_rtn_u64"}, {112, "ds_cmpst_rtn_b64"}, {118, "ds_read_b64"},
    {119, "ds_read2_b64"}, {120, "ds_read2st64_b64"}, {124, "ds_add_rtn_f64"}, {222, "ds_write_b96"},
    {223, "ds_write_b128"}, {254, "ds_read_b96"}, {255, "ds_read_b128"}};
constexpr Name kFlat[] = {{16, "load_ubyte"}, {17, "load_sbyte"}, {18, "load_ushort"}, {19, "load_sshort"},
    {20, "load_dword"}, {21, "load_dwordx2"}, {22, "load_dwordx3"}, {23, "load_dwordx4"}, {24, "store_byte"},
    {25, "store_byte_d16_hi"}, {26, "store_short"}, {27, "store_short_d16_hi"}, {28, "store_dword"},
    {29, "store_dwordx2"}, {30, "store_dwordx3"}, {31, "store_dwordx4"}, {64, "atomic_swap"},
    {65, "atomic_cmpswap"}, {66, "atomic_add"}, {67, "atomic_sub"}, {68, "atomic_smin"}, {69, "atomic_umin"},
    {70, "atomic_smax"}, {71, "atomic_umax"}, {72, "atomic_and"}, {73, "atomic_or"}, {74, "atomic_xor"},
    {75, "atomic_inc"}, {76, "atomic_dec"}, {77, "atomic_add_f32"}, {79, "atomic_add_f64"},
    {96, "atomic_swap_x2"}, {97, "atomic_cmpswap_x2"}, {98, "atomic_add_x2"}, {100, "atomic_smin_x2"},
    {101, "atomic_umin_x2"}, {102, "atomic_smax_x2"}, {103, "atomic_umax_x2"}};
constexpr Name kMubuf[] = {{40, "buffer_wbl2"}, {41, "buffer_inv"}, {63, "buffer_wbinvl1_vol"}};

template <std::size_t N>
const char* find(const Name (&table)[N], std::uint32_t op) {
  for (auto& n : table)
    if (n.op == op) return n.name;
  return nullptr;
}

const char* family_name(Family f) {
  switch (f) {
    case Family::SOP1: return "SOP1";
    case Family::SOP2: return "SOP2";
    case Family::SOPC: return "SOPC";
    case Family::SOPK: return "SOPK";
    case Family::SOPP: return "SOPP";
    case Family::SMEM: return "SMEM";
    case Family::VOP1: return "VOP1";
    case Family::VOP2: return "VOP2";
    case Family::VOPC: return "VOPC";
    case Family::VOP3: return "VOP3";
    case Family::VOP3P: return "VOP3P";
    case Family::DS: return "DS";
    case Family::FLAT: return "FLAT";
    case Family::MUBUF: return "MUBUF";
  }
  return "?";
}

// VOP3P opcodes with their own refusal: the AGPR moves and some MFMAs by name (gfx90a names;
// gfx942 spells the f16 and f64 ones with an underscore before the type).
struct Vop3pName {
  std::uint32_t op;
  const char* gfx90a;
  const char* gfx942;
};
constexpr Vop3pName kMfma[] = {{64, "v_mfma_f32_32x32x1f32", "v_mfma_f32_32x32x1_2b_f32"},
                               {66, "v_mfma_f32_4x4x1f32", "v_mfma_f32_4x4x1_16b_f32"},
                               {76, "v_mfma_f32_32x32x8f16", "v_mfma_f32_32x32x8_f16"},
                               {77, "v_mfma_f32_16x16x16f16", "v_mfma_f32_16x16x16_f16"},
                               {110, "v_mfma_f64_16x16x4f64", "v_mfma_f64_16x16x4_f64"}};
constexpr std::uint32_t kVop3pAccRead = 88, kVop3pAccWrite = 89, kVop3pFirstMfma = 64;

constexpr Name kVop3p[] = {{14, "v_pk_fma_f16"}, {32, "v_fma_mix_f32"}, {33, "v_fma_mixlo_f16"},
    {34, "v_fma_mixhi_f16"}, {48, "v_pk_fma_f32"}, {49, "v_pk_mul_f32"}, {50, "v_pk_add_f32"}, {51, "v_pk_mov_b32"}};


}  // namespace

const char* segment_prefix(std::uint32_t seg) { return seg == SEG_FLAT ? "flat" : seg == SEG_SCRATCH ? "scratch" : "global"; }
// Decodes the instruction at w (up to `available` dwords) for `target`.
std::variant<Inst, DecodeError> decode(Target target, const std::uint32_t* w, std::size_t available) {
  if (!available) return DecodeError{"no instruction"};
  std::uint32_t d = w[0];
  Inst in{};
  in.w0 = d;
  const bool cdna3 = target == Target::gfx942;
  auto second = [&](const char* what) -> std::optional<DecodeError> {
    if (available < 2) return DecodeError{fmt::format("{} past the code (encoding {:#010x})", what, d)};
    in.w1 = w[1], in.length = 2;
    return std::nullopt;
  };
  auto unknown = [&](std::uint32_t op) {
    return DecodeError{fmt::format("unknown {} instruction: opcode {} (encoding {:#010x})", family_name(in.family), op, d)};
  };
  auto literal = [&](bool has) -> std::optional<DecodeError> {
    if (!has) return std::nullopt;
    if (auto e = second("a literal")) return e;
    in.literal = in.w1;
    return std::nullopt;
  };
  std::uint32_t top9 = d >> 23;
  if (top9 == 0x17D) {
    in.family = Family::SOP1, in.op = (d >> 8) & 0xff;
    if (!(in.name = find(kSop1, in.op))) return unknown(in.op);
    if (auto e = literal((d & 0xff) == LITERAL)) return *e;
    return in;
  }
  if (top9 == 0x17E) {
    in.family = Family::SOPC, in.op = (d >> 16) & 0x7f;
    if (!(in.name = find(kSopc, in.op))) return unknown(in.op);
    if (auto e = literal((d & 0xff) == LITERAL || ((d >> 8) & 0xff) == LITERAL)) return *e;
    return in;
  }
  if (top9 == 0x17F) {
    in.family = Family::SOPP, in.op = (d >> 16) & 0x7f;
    if (!(in.name = find(kSopp, in.op))) return unknown(in.op);
    return in;
  }
  if ((d >> 28) == 0xB) {
    in.family = Family::SOPK, in.op = (d >> 23) & 0x1f;
    if (!(in.name = find(kSopk, in.op))) return unknown(in.op);
    return in;
  }
  if ((d >> 30) == 0x2) {
    in.family = Family::SOP2, in.op = (d >> 23) & 0x7f;
    if (!(in.name = find(kSop2, in.op))) return unknown(in.op);
    if (auto e = literal((d & 0xff) == LITERAL || ((d >> 8) & 0xff) == LITERAL)) return *e;
    return in;
  }
  if ((d >> 31) == 0) {  // VOP1, VOPC or VOP2
    if ((d >> 25) == 0x3F) in.family = Family::VOP1, in.op = (d >> 9) & 0xff, in.name = find(kVop1, in.op);
    else if ((d >> 25) == 0x3E) in.family = Family::VOPC, in.op = (d >> 17) & 0xff, in.name = find(kVopc, in.op);
    else in.family = Family::VOP2, in.op = (d >> 25) & 0x3f, in.name = find(kVop2, in.op);
    if (in.family == Family::VOP1 && in.op == 56 && !cdna3) in.name = nullptr;  // v_mov_b64: gfx940 on
    if (in.family == Family::VOP2 && in.op == 22 && cdna3) in.name = nullptr;   // v_mac_f32: not on gfx940
    if (!in.name) return unknown(in.op);
    std::uint32_t src0 = d & 0x1ff;
    if (src0 == SOURCE_SDWA) {
      if (auto e = second("an SDWA word")) return *e;
      in.sdwa = true;
      return in;
    }
    if (src0 == SOURCE_DPP) {
      if (auto e = second("a DPP word")) return *e;
      in.dpp = true;
      return in;
    }
    if (auto e = literal(src0 == LITERAL)) return *e;
    return in;
  }
  std::uint32_t top6 = d >> 26;
  switch (top6) {
    case 0x34: {  // VOP3 (VOP3P within it)
      if (top9 == 0x1A7) {
        std::uint32_t op = (d >> 16) & 0x7f;
        if ((in.name = find(kVop3p, op))) {
          in.family = Family::VOP3P, in.op = op;
          if (auto e = second("a 64-bit instruction")) return *e;
          for (int k = 0; k < 3; ++k)
            if (((in.w1 >> (9 * k)) & 0x1ff) == LITERAL)
              return DecodeError{fmt::format("{}: a literal in VOP3P, which GFX9 does not encode (encoding {:#010x})", in.name, d)};
          return in;
        }
        for (auto& m : kMfma)
          if (m.op == op)
            return DecodeError{fmt::format("{}: MFMA is not simulated (encoding {:#010x})", cdna3 ? m.gfx942 : m.gfx90a, d)};
        if (op == kVop3pAccRead || op == kVop3pAccWrite)
          return DecodeError{fmt::format("{}: AGPR moves are not simulated (encoding {:#010x})",
                                         op == kVop3pAccRead ? "v_accvgpr_read_b32" : "v_accvgpr_write_b32", d)};
        if (op >= kVop3pFirstMfma)
          return DecodeError{fmt::format("VOP3P opcode {}: MFMA is not simulated (encoding {:#010x})", op, d)};
        return DecodeError{fmt::format("unknown VOP3P instruction: opcode {} (encoding {:#010x})", op, d)};
      }
      in.family = Family::VOP3, in.op = (d >> 16) & 0x3ff;
      if (in.op < kVop3Vop2) in.name = find(kVopc, in.op);
      else if (in.op < kVop3Vop1) in.name = find(kVop2, in.op - kVop3Vop2);
      else if (in.op < kVop3Own) in.name = find(kVop1, in.op - kVop3Vop1);
      else in.name = find(kVop3, in.op);
      if ((in.op == kVop3Vop1 + 56 || in.op == 520) && !cdna3) in.name = nullptr;  // gfx940 on
      if ((in.op == kVop3Vop2 + 22 || in.op == 449) && cdna3) in.name = nullptr;   // v_mac_f32, v_mad_f32: not on gfx940
      if (!in.name) return unknown(in.op);
      if (auto e = second("a 64-bit instruction")) return *e;
      for (int k = 0; k < 3; ++k)
        if (((in.w1 >> (9 * k)) & 0x1ff) == LITERAL)
          return DecodeError{fmt::format("{}: a literal in VOP3, which GFX9 does not encode (encoding {:#010x})", in.name, d)};
      return in;
    }
    case 0x30:
      in.family = Family::SMEM, in.op = (d >> 18) & 0xff;
      if (!(in.name = find(kSmem, in.op))) return unknown(in.op);
      if (auto e = second("a 64-bit instruction")) return *e;
      return in;
    case 0x36:
      in.family = Family::DS, in.op = (d >> 17) & 0xff;
      if (!(in.name = find(kDs, in.op))) return unknown(in.op);
      if ((d >> 25) & 1) return DecodeError{fmt::format("{} on AGPRs is not simulated (encoding {:#010x})", in.name, d)};
      if (auto e = second("a 64-bit instruction")) return *e;
      return in;
    case 0x37: {
      in.family = Family::FLAT, in.op = (d >> 18) & 0x7f;
      std::uint32_t seg = (d >> 14) & 3;
      in.name = seg == 3 ? nullptr : find(kFlat, in.op);
      bool atomic = in.op >= 64;
      if (in.name && atomic && seg == SEG_SCRATCH) in.name = nullptr;
      if (in.name && in.op == 77 && seg == SEG_FLAT && !cdna3) in.name = nullptr;  // flat f32 add: gfx940 on
      if (!in.name)
        return DecodeError{fmt::format("unknown {} instruction: opcode {} (encoding {:#010x})",
                                       seg == 3 ? "FLAT segment 3" : segment_prefix(seg), in.op, d)};
      if (auto e = second("a 64-bit instruction")) return *e;
      if ((in.w1 >> 23) & 1)
        return DecodeError{fmt::format("{}_{} on AGPRs is not simulated (encoding {:#010x})", segment_prefix(seg), in.name, d)};
      return in;
    }
    case 0x38:
      in.family = Family::MUBUF, in.op = (d >> 18) & 0x7f;
      in.name = in.op >= kBufferFirst && in.op <= kBufferLast ? find(kFlat, in.op) : find(kMubuf, in.op);
      if ((in.op == 41 && !cdna3) || (in.op == 63 && cdna3)) in.name = nullptr;
      if (!in.name)
        return DecodeError{fmt::format("MUBUF opcode {}: buffer atomics and formatted loads and stores are not simulated "
                                       "(encoding {:#010x})", in.op, d)};
      if (auto e = second("a 64-bit instruction")) return *e;
      if (in.op <= kBufferLast && ((in.w1 >> 23) & 1))
        return DecodeError{fmt::format("buffer_{} on AGPRs is not simulated (encoding {:#010x})", in.name, d)};
      if (in.op <= kBufferLast && ((d >> 16) & 1))
        return DecodeError{fmt::format("buffer_{} into LDS is not simulated (encoding {:#010x})", in.name, d)};
      return in;
  }
  return DecodeError{fmt::format("an encoding the interpreter does not know: {:#010x}", d)};
}

// The instruction's name as llvm-objdump prints it.
std::string display_name(const Inst& in) {
  switch (in.family) {
    case Family::FLAT: return fmt::format("{}_{}", segment_prefix((in.w0 >> 14) & 3), in.name);
    case Family::MUBUF: return in.op <= kBufferLast ? fmt::format("buffer_{}", in.name) : in.name;
    case Family::VOP1:
      if (in.op == 2 && !in.dpp && !in.sdwa) return in.name;  // v_readfirstlane_b32 has no _e32
      [[fallthrough]];
    case Family::VOP2: case Family::VOPC:
      return fmt::format("{}{}", in.name, in.dpp ? "_dpp" : in.sdwa ? "_sdwa" : "_e32");
    case Family::VOP3: return in.op < kVop3Own ? fmt::format("{}_e64", in.name) : in.name;
    default: return in.name;
  }
}

std::string mnemonic(Target target, const std::uint32_t* words, std::size_t available, std::size_t& length,
                     std::string* why) {
  auto d = decode(target, words, available);
  if (auto* in = std::get_if<Inst>(&d)) {
    length = in->length;
    return display_name(*in);
  }
  length = 1;
  if (why) *why = std::get<DecodeError>(d).why;
  return "";
}
}  // namespace rig::sim::amd::gfx9
