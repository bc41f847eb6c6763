// gfx11_subset.s — one of each instruction the gfx11 interpreter decodes (tests/sim/amd/
// gfx11.cpp). Assembled by llvm-mc-19 and disassembled by llvm-objdump-19 at build time; the
// decoder test checks the interpreter names each encoding as LLVM does.
s_mov_b32 s0, s1
s_mov_b64 s[0:1], s[2:3]
s_not_b32 s0, s1
s_brev_b32 s0, s1
s_and_saveexec_b32 s0, s1
s_or_saveexec_b32 s0, s1
s_andn2_saveexec_b32 s0, s1
s_and_not1_saveexec_b32 s0, s1
s_sext_i32_i8 s0, s1
s_sext_i32_i16 s0, s1
s_abs_i32 s0, s1
s_ff1_i32_b32 s0, s1
s_ctz_i32_b32 s0, s1
s_bcnt1_i32_b32 s0, s1
s_add_u32 s0, s1, s2
s_sub_u32 s0, s1, s2
s_add_i32 s0, s1, s2
s_sub_i32 s0, s1, s2
s_addc_u32 s0, s1, s2
s_subb_u32 s0, s1, s2
s_min_i32 s0, s1, s2
s_min_u32 s0, s1, s2
s_max_i32 s0, s1, s2
s_max_u32 s0, s1, s2
s_cselect_b32 s0, s1, s2
s_cselect_b64 s[0:1], s[2:3], s[4:5]
s_and_b32 s0, s1, s2
s_and_b64 s[0:1], s[2:3], s[4:5]
s_or_b32 s0, s1, s2
s_or_b64 s[0:1], s[2:3], s[4:5]
s_xor_b32 s0, s1, s2
s_xor_b64 s[0:1], s[2:3], s[4:5]
s_andn2_b32 s0, s1, s2
s_orn2_b32 s0, s1, s2
s_lshl_b32 s0, s1, s2
s_lshl_b64 s[0:1], s[2:3], s4
s_lshr_b32 s0, s1, s2
s_lshr_b64 s[0:1], s[2:3], s4
s_ashr_i32 s0, s1, s2
s_ashr_i64 s[0:1], s[2:3], s4
s_mul_i32 s0, s1, s2
s_mul_hi_u32 s0, s1, s2
s_mul_hi_i32 s0, s1, s2
s_bfe_u32 s0, s1, s2
s_bfe_i32 s0, s1, s2
s_lshl1_add_u32 s0, s1, s2
s_lshl2_add_u32 s0, s1, s2
s_lshl3_add_u32 s0, s1, s2
s_lshl4_add_u32 s0, s1, s2
s_pack_ll_b32_b16 s0, s1, s2
s_cmp_eq_i32 s0, s1
s_cmp_lg_i32 s0, s1
s_cmp_gt_i32 s0, s1
s_cmp_ge_i32 s0, s1
s_cmp_lt_i32 s0, s1
s_cmp_le_i32 s0, s1
s_cmp_eq_u32 s0, s1
s_cmp_lg_u32 s0, s1
s_cmp_gt_u32 s0, s1
s_cmp_ge_u32 s0, s1
s_cmp_lt_u32 s0, s1
s_cmp_le_u32 s0, s1
s_cmp_eq_u64 s[0:1], s[2:3]
s_cmp_lg_u64 s[0:1], s[2:3]
s_bitcmp0_b32 s0, s1
s_bitcmp1_b32 s0, s1
s_movk_i32 s0, 0x1234
s_cmovk_i32 s0, 0x1234
s_addk_i32 s0, 0x1234
s_mulk_i32 s0, 0x1234
s_cmpk_eq_u32 s0, 0x1234
s_waitcnt_vscnt null, 0x0
s_waitcnt_vmcnt null, 0x0
s_waitcnt_lgkmcnt null, 0x0
s_nop 0
s_endpgm
s_branch 1
s_cbranch_scc0 1
s_cbranch_scc1 1
s_cbranch_vccz 1
s_cbranch_vccnz 1
s_cbranch_execz 1
s_cbranch_execnz 1
s_barrier
s_waitcnt 0
s_sleep 0
s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)
s_clause 0x1
s_delay_alu instid0(VALU_DEP_1)
s_code_end
s_waitcnt_depctr 0xfffe
s_load_b32 s0, s[2:3], 0x0
s_load_b64 s[0:1], s[2:3], 0x0
s_load_b128 s[0:3], s[2:3], 0x0
s_load_b256 s[0:7], s[2:3], 0x0
s_load_b512 s[0:15], s[2:3], 0x0
v_mov_b32 v0, v1
v_readfirstlane_b32 s0, v1
v_cvt_f32_u32 v0, v1
v_cvt_f32_i32 v0, v1
v_cvt_u32_f32 v0, v1
v_cvt_i32_f32 v0, v1
v_rcp_f32 v0, v1
v_sqrt_f32 v0, v1
v_not_b32 v0, v1
v_bfrev_b32 v0, v1
v_rcp_iflag_f32 v0, v1
v_cndmask_b32 v0, v1, v2, vcc_lo
v_add_f32 v0, v1, v2
v_sub_f32 v0, v1, v2
v_subrev_f32 v0, v1, v2
v_mul_f32 v0, v1, v2
v_min_f32 v0, v1, v2
v_max_f32 v0, v1, v2
v_min_i32 v0, v1, v2
v_max_i32 v0, v1, v2
v_min_u32 v0, v1, v2
v_max_u32 v0, v1, v2
v_lshrrev_b32 v0, v1, v2
v_ashrrev_i32 v0, v1, v2
v_lshlrev_b32 v0, v1, v2
v_and_b32 v0, v1, v2
v_or_b32 v0, v1, v2
v_xor_b32 v0, v1, v2
v_add_co_ci_u32 v0, vcc_lo, v1, v2, vcc_lo
v_sub_co_ci_u32 v0, vcc_lo, v1, v2, vcc_lo
v_subrev_co_ci_u32 v0, vcc_lo, v1, v2, vcc_lo
v_add_nc_u32 v0, v1, v2
v_sub_nc_u32 v0, v1, v2
v_subrev_nc_u32 v0, v1, v2
v_fmac_f32 v0, v1, v2
v_mul_u32_u24 v0, v1, v2
v_mul_hi_u32_u24 v0, v1, v2
v_mul_i32_i24 v0, v1, v2
v_cmp_eq_u32 vcc_lo, v1, v2
v_cmp_ne_u32 vcc_lo, v1, v2
v_cmp_gt_u32 vcc_lo, v1, v2
v_cmp_lt_u32 vcc_lo, v1, v2
v_cmp_ge_u32 vcc_lo, v1, v2
v_cmp_le_u32 vcc_lo, v1, v2
v_cmp_eq_i32 vcc_lo, v1, v2
v_cmp_ne_i32 vcc_lo, v1, v2
v_cmp_gt_i32 vcc_lo, v1, v2
v_cmp_lt_i32 vcc_lo, v1, v2
v_cmp_ge_i32 vcc_lo, v1, v2
v_cmp_le_i32 vcc_lo, v1, v2
v_cmp_eq_f32 vcc_lo, v1, v2
v_cmp_lt_f32 vcc_lo, v1, v2
v_cmp_gt_f32 vcc_lo, v1, v2
v_cmp_le_f32 vcc_lo, v1, v2
v_cmp_ge_f32 vcc_lo, v1, v2
v_cmp_neq_f32 vcc_lo, v1, v2
v_cmp_lg_f32 vcc_lo, v1, v2
v_cmp_eq_u64 vcc_lo, v[1:2], v[3:4]
v_cmp_ne_u64 vcc_lo, v[1:2], v[3:4]
v_cmp_gt_u64 vcc_lo, v[1:2], v[3:4]
v_cmp_lt_u64 vcc_lo, v[1:2], v[3:4]
v_cmpx_eq_u32 v1, v2
v_cmpx_ne_u32 v1, v2
v_cmpx_gt_u32 v1, v2
v_cmpx_lt_u32 v1, v2
v_cmpx_ge_u32 v1, v2
v_cmpx_le_u32 v1, v2
v_cmpx_gt_i32 v1, v2
v_cmpx_lt_i32 v1, v2
v_lshl_add_u32 v0, v1, v2, v3
v_add_lshl_u32 v0, v1, v2, v3
v_lshl_or_b32 v0, v1, v2, v3
v_and_or_b32 v0, v1, v2, v3
v_or3_b32 v0, v1, v2, v3
v_xor3_b32 v0, v1, v2, v3
v_add3_u32 v0, v1, v2, v3
v_mad_u32_u24 v0, v1, v2, v3
v_mad_u64_u32 v[0:1], s0, v1, v2, v[3:4]
v_mad_i64_i32 v[0:1], s0, v1, v2, v[3:4]
v_lshlrev_b64 v[0:1], v1, v[2:3]
v_lshrrev_b64 v[0:1], v1, v[2:3]
v_ashrrev_i64 v[0:1], v1, v[2:3]
v_add_co_u32 v0, vcc_lo, v1, v2
v_sub_co_u32 v0, vcc_lo, v1, v2
v_subrev_co_u32 v0, vcc_lo, v1, v2
v_mul_lo_u32 v0, v1, v2
v_mul_hi_u32 v0, v1, v2
v_mul_hi_i32 v0, v1, v2
v_fma_f32 v0, v1, v2, v3
v_bfe_u32 v0, v1, v2, v3
v_bfe_i32 v0, v1, v2, v3
v_bfi_b32 v0, v1, v2, v3
v_alignbit_b32 v0, v1, v2, v3
v_min3_u32 v0, v1, v2, v3
v_max3_u32 v0, v1, v2, v3
v_add_nc_u32_e64 v0, v1, v2
v_readlane_b32 s0, v1, s2
v_writelane_b32 v0, s1, s2
v_ldexp_f32 v0, v1, v2
v_dual_add_f32 v0, v1, v2 :: v_dual_mul_f32 v3, v4, v5
v_dual_fmac_f32 v0, v1, v2 :: v_dual_add_nc_u32 v3, v4, v5
v_dual_cndmask_b32 v0, v1, v2 :: v_dual_sub_f32 v3, v4, v5
v_dual_subrev_f32 v0, v1, v2 :: v_dual_max_f32 v3, v4, v5
v_dual_min_f32 v0, v1, v2 :: v_dual_mul_f32 v3, v4, v5
v_dual_fmaak_f32 v0, v1, v2, 0x1 :: v_dual_mov_b32 v3, v4
v_dual_fmamk_f32 v0, v1, 0x1, v2 :: v_dual_mov_b32 v3, v4
ds_store_b32 v0, v1
ds_store_b64 v0, v[1:2]
ds_store_2addr_b32 v0, v1, v2 offset1:1
ds_load_b32 v0, v1
ds_load_b64 v[0:1], v1
ds_load_2addr_b32 v[0:1], v2 offset1:1
ds_add_u32 v0, v1
ds_add_rtn_u32 v0, v1, v2
global_load_b32 v0, v[1:2], off
global_load_b64 v[0:1], v[1:2], off
global_load_b96 v[0:2], v[1:2], off
global_load_b128 v[0:3], v[1:2], off
global_load_u8 v0, v[1:2], off
global_load_u16 v0, v[1:2], off
global_load_i8 v0, v[1:2], off
global_load_i16 v0, v[1:2], off
global_store_b32 v[0:1], v2, off
global_store_b64 v[0:1], v[2:3], off
global_store_b96 v[0:1], v[2:4], off
global_store_b128 v[0:1], v[2:5], off
global_store_b8 v[0:1], v2, off
global_store_b16 v[0:1], v2, off
global_load_b32 v0, v1, s[2:3]
global_store_b32 v1, v2, s[2:3]
flat_load_b32 v0, v[1:2]
flat_load_b64 v[0:1], v[1:2]
flat_load_b128 v[0:3], v[1:2]
flat_store_b32 v[0:1], v2
flat_store_b64 v[0:1], v[2:3]
flat_store_b128 v[0:1], v[2:5]
global_atomic_add_u32 v[0:1], v2, off
buffer_gl0_inv
buffer_gl1_inv
s_getpc_b64 s[0:1]
s_setpc_b64 s[0:1]
s_swappc_b64 s[0:1], s[2:3]
v_mad_i64_i32 v[0:1], s0, v1, v2, v[4:5]
v_cndmask_b32_e64 v0, v1, v2, s0
v_dual_mov_b32 v0, v1 :: v_dual_mov_b32 v3, v2
v_dual_mov_b32 v0, v1 :: v_dual_lshlrev_b32 v3, v4, v5
v_dual_mov_b32 v0, v1 :: v_dual_and_b32 v3, v4, v5
v_dual_cndmask_b32 v0, v1, v2 :: v_dual_add_nc_u32 v3, v4, v5
