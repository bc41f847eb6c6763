// gfx9_subset_gfx90a.s — one of each instruction the CDNA interpreter decodes for gfx90a (tests/sim/amd/
// gfx9.cpp), and some of their operand forms. Assembled by llvm-mc-19 and disassembled by
// llvm-objdump-19 at build time; the decoder test checks the interpreter names each encoding
// as LLVM does.
s_mov_b32 s1, s2
s_not_b32 s1, s2
s_brev_b32 s1, s2
s_bcnt1_i32_b32 s1, s2
s_ff1_i32_b32 s1, s2
s_flbit_i32_b32 s1, s2
s_sext_i32_i8 s1, s2
s_sext_i32_i16 s1, s2
s_abs_i32 s1, s2
s_bcnt1_i32_b64 s1, s[2:3]
s_ff1_i32_b64 s1, s[2:3]
s_flbit_i32_b64 s1, s[2:3]
s_mov_b64 s[2:3], s[4:5]
s_not_b64 s[2:3], s[4:5]
s_and_saveexec_b64 s[2:3], s[4:5]
s_or_saveexec_b64 s[2:3], s[4:5]
s_xor_saveexec_b64 s[2:3], s[4:5]
s_andn2_saveexec_b64 s[2:3], s[4:5]
s_orn2_saveexec_b64 s[2:3], s[4:5]
s_swappc_b64 s[2:3], s[4:5]
s_getpc_b64 s[2:3]
s_setpc_b64 s[2:3]
s_add_u32 s1, s2, s3
s_sub_u32 s1, s2, s3
s_add_i32 s1, s2, s3
s_sub_i32 s1, s2, s3
s_addc_u32 s1, s2, s3
s_subb_u32 s1, s2, s3
s_min_i32 s1, s2, s3
s_min_u32 s1, s2, s3
s_max_i32 s1, s2, s3
s_max_u32 s1, s2, s3
s_cselect_b32 s1, s2, s3
s_and_b32 s1, s2, s3
s_or_b32 s1, s2, s3
s_xor_b32 s1, s2, s3
s_andn2_b32 s1, s2, s3
s_orn2_b32 s1, s2, s3
s_lshl_b32 s1, s2, s3
s_lshr_b32 s1, s2, s3
s_ashr_i32 s1, s2, s3
s_bfe_u32 s1, s2, s3
s_bfe_i32 s1, s2, s3
s_mul_i32 s1, s2, s3
s_mul_hi_u32 s1, s2, s3
s_mul_hi_i32 s1, s2, s3
s_lshl1_add_u32 s1, s2, s3
s_lshl2_add_u32 s1, s2, s3
s_lshl3_add_u32 s1, s2, s3
s_lshl4_add_u32 s1, s2, s3
s_pack_ll_b32_b16 s1, s2, s3
s_cselect_b64 s[2:3], s[4:5], s[6:7]
s_and_b64 s[2:3], s[4:5], s[6:7]
s_or_b64 s[2:3], s[4:5], s[6:7]
s_xor_b64 s[2:3], s[4:5], s[6:7]
s_andn2_b64 s[2:3], s[4:5], s[6:7]
s_orn2_b64 s[2:3], s[4:5], s[6:7]
s_lshl_b64 s[2:3], s[4:5], s6
s_lshr_b64 s[2:3], s[4:5], s6
s_ashr_i64 s[2:3], s[4:5], s6
s_bfe_u64 s[2:3], s[4:5], s6
s_cmp_eq_i32 s1, s2
s_cmp_lg_i32 s1, s2
s_cmp_gt_i32 s1, s2
s_cmp_ge_i32 s1, s2
s_cmp_lt_i32 s1, s2
s_cmp_le_i32 s1, s2
s_cmp_eq_u32 s1, s2
s_cmp_lg_u32 s1, s2
s_cmp_gt_u32 s1, s2
s_cmp_ge_u32 s1, s2
s_cmp_lt_u32 s1, s2
s_cmp_le_u32 s1, s2
s_bitcmp0_b32 s1, s2
s_bitcmp1_b32 s1, s2
s_cmp_eq_u64 s[2:3], s[4:5]
s_cmp_lg_u64 s[2:3], s[4:5]
s_movk_i32 s1, 0x10
s_cmovk_i32 s1, 0x10
s_cmpk_eq_i32 s1, 0x10
s_cmpk_lg_i32 s1, 0x10
s_cmpk_gt_i32 s1, 0x10
s_cmpk_ge_i32 s1, 0x10
s_cmpk_lt_i32 s1, 0x10
s_cmpk_le_i32 s1, 0x10
s_cmpk_eq_u32 s1, 0x10
s_cmpk_lg_u32 s1, 0x10
s_cmpk_gt_u32 s1, 0x10
s_cmpk_ge_u32 s1, 0x10
s_cmpk_lt_u32 s1, 0x10
s_cmpk_le_u32 s1, 0x10
s_addk_i32 s1, 0x10
s_mulk_i32 s1, 0x10
s_nop 0
s_sleep 0
s_setprio 0
s_endpgm
s_barrier
s_waitcnt 0
s_branch 4
s_cbranch_scc0 4
s_cbranch_scc1 4
s_cbranch_vccz 4
s_cbranch_vccnz 4
s_cbranch_execz 4
s_cbranch_execnz 4
s_load_dword s1, s[2:3], 0x10
s_load_dwordx2 s[4:5], s[2:3], 0x10
s_load_dwordx4 s[4:7], s[2:3], 0x10
s_load_dwordx8 s[4:11], s[2:3], 0x10
s_load_dwordx16 s[4:19], s[2:3], 0x10
v_mov_b32 v1, v2
v_cvt_f32_i32 v1, v2
v_cvt_f32_u32 v1, v2
v_cvt_u32_f32 v1, v2
v_cvt_i32_f32 v1, v2
v_trunc_f32 v1, v2
v_ceil_f32 v1, v2
v_rndne_f32 v1, v2
v_floor_f32 v1, v2
v_fract_f32 v1, v2
v_exp_f32 v1, v2
v_log_f32 v1, v2
v_rcp_f32 v1, v2
v_rcp_iflag_f32 v1, v2
v_rsq_f32 v1, v2
v_sqrt_f32 v1, v2
v_sin_f32 v1, v2
v_cos_f32 v1, s2
v_sin_f32_e64 v1, -|v2|
v_cos_f32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_sin_f32_sdwa v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:DWORD
v_not_b32 v1, v2
v_bfrev_b32 v1, v2
v_ffbh_u32 v1, v2
v_ffbl_b32 v1, v2
v_ffbh_i32 v1, v2
v_readfirstlane_b32 s1, v2
v_cvt_f64_f32 v[2:3], v4
v_cvt_f64_i32 v[2:3], v4
v_cvt_f64_u32 v[2:3], v4
v_cvt_f32_f64 v1, v[2:3]
v_cvt_i32_f64 v1, v[2:3]
v_cvt_u32_f64 v1, v[2:3]
v_trunc_f64 v[2:3], v[4:5]
v_ceil_f64 v[2:3], v[4:5]
v_rndne_f64 v[2:3], v[4:5]
v_floor_f64 v[2:3], v[4:5]
v_fract_f64 v[2:3], v[4:5]
v_rcp_f64 v[2:3], v[4:5]
v_rsq_f64 v[2:3], v[4:5]
v_sqrt_f64 v[2:3], v[4:5]
v_cndmask_b32 v1, v2, v3, vcc
v_add_f32 v1, v2, v3
v_sub_f32 v1, v2, v3
v_subrev_f32 v1, v2, v3
v_mul_f32 v1, v2, v3
v_mul_i32_i24 v1, v2, v3
v_mul_hi_i32_i24 v1, v2, v3
v_mul_u32_u24 v1, v2, v3
v_mul_hi_u32_u24 v1, v2, v3
v_min_f32 v1, v2, v3
v_max_f32 v1, v2, v3
v_min_i32 v1, v2, v3
v_max_i32 v1, v2, v3
v_min_u32 v1, v2, v3
v_max_u32 v1, v2, v3
v_lshrrev_b32 v1, v2, v3
v_ashrrev_i32 v1, v2, v3
v_lshlrev_b32 v1, v2, v3
v_and_b32 v1, v2, v3
v_or_b32 v1, v2, v3
v_xor_b32 v1, v2, v3
v_add_u32 v1, v2, v3
v_sub_u32 v1, v2, v3
v_subrev_u32 v1, v2, v3
v_fmac_f32 v1, v2, v3
v_add_co_u32 v1, vcc, v2, v3
v_sub_co_u32 v1, vcc, v2, v3
v_subrev_co_u32 v1, vcc, v2, v3
v_addc_co_u32 v1, vcc, v2, v3, vcc
v_subb_co_u32 v1, vcc, v2, v3, vcc
v_subbrev_co_u32 v1, vcc, v2, v3, vcc
v_fmac_f64 v[2:3], v[4:5], v[6:7]
v_cmp_f_f32 vcc, v2, v3
v_cmpx_f_f32 vcc, v2, v3
v_cmp_lt_f32 vcc, v2, v3
v_cmpx_lt_f32 vcc, v2, v3
v_cmp_eq_f32 vcc, v2, v3
v_cmpx_eq_f32 vcc, v2, v3
v_cmp_le_f32 vcc, v2, v3
v_cmpx_le_f32 vcc, v2, v3
v_cmp_gt_f32 vcc, v2, v3
v_cmpx_gt_f32 vcc, v2, v3
v_cmp_lg_f32 vcc, v2, v3
v_cmpx_lg_f32 vcc, v2, v3
v_cmp_ge_f32 vcc, v2, v3
v_cmpx_ge_f32 vcc, v2, v3
v_cmp_o_f32 vcc, v2, v3
v_cmpx_o_f32 vcc, v2, v3
v_cmp_u_f32 vcc, v2, v3
v_cmpx_u_f32 vcc, v2, v3
v_cmp_nge_f32 vcc, v2, v3
v_cmpx_nge_f32 vcc, v2, v3
v_cmp_nlg_f32 vcc, v2, v3
v_cmpx_nlg_f32 vcc, v2, v3
v_cmp_ngt_f32 vcc, v2, v3
v_cmpx_ngt_f32 vcc, v2, v3
v_cmp_nle_f32 vcc, v2, v3
v_cmpx_nle_f32 vcc, v2, v3
v_cmp_neq_f32 vcc, v2, v3
v_cmpx_neq_f32 vcc, v2, v3
v_cmp_nlt_f32 vcc, v2, v3
v_cmpx_nlt_f32 vcc, v2, v3
v_cmp_tru_f32 vcc, v2, v3
v_cmpx_tru_f32 vcc, v2, v3
v_cmp_f_f64 vcc, v[2:3], v[4:5]
v_cmpx_f_f64 vcc, v[2:3], v[4:5]
v_cmp_lt_f64 vcc, v[2:3], v[4:5]
v_cmpx_lt_f64 vcc, v[2:3], v[4:5]
v_cmp_eq_f64 vcc, v[2:3], v[4:5]
v_cmpx_eq_f64 vcc, v[2:3], v[4:5]
v_cmp_le_f64 vcc, v[2:3], v[4:5]
v_cmpx_le_f64 vcc, v[2:3], v[4:5]
v_cmp_gt_f64 vcc, v[2:3], v[4:5]
v_cmpx_gt_f64 vcc, v[2:3], v[4:5]
v_cmp_lg_f64 vcc, v[2:3], v[4:5]
v_cmpx_lg_f64 vcc, v[2:3], v[4:5]
v_cmp_ge_f64 vcc, v[2:3], v[4:5]
v_cmpx_ge_f64 vcc, v[2:3], v[4:5]
v_cmp_o_f64 vcc, v[2:3], v[4:5]
v_cmpx_o_f64 vcc, v[2:3], v[4:5]
v_cmp_u_f64 vcc, v[2:3], v[4:5]
v_cmpx_u_f64 vcc, v[2:3], v[4:5]
v_cmp_nge_f64 vcc, v[2:3], v[4:5]
v_cmpx_nge_f64 vcc, v[2:3], v[4:5]
v_cmp_nlg_f64 vcc, v[2:3], v[4:5]
v_cmpx_nlg_f64 vcc, v[2:3], v[4:5]
v_cmp_ngt_f64 vcc, v[2:3], v[4:5]
v_cmpx_ngt_f64 vcc, v[2:3], v[4:5]
v_cmp_nle_f64 vcc, v[2:3], v[4:5]
v_cmpx_nle_f64 vcc, v[2:3], v[4:5]
v_cmp_neq_f64 vcc, v[2:3], v[4:5]
v_cmpx_neq_f64 vcc, v[2:3], v[4:5]
v_cmp_nlt_f64 vcc, v[2:3], v[4:5]
v_cmpx_nlt_f64 vcc, v[2:3], v[4:5]
v_cmp_tru_f64 vcc, v[2:3], v[4:5]
v_cmpx_tru_f64 vcc, v[2:3], v[4:5]
v_cmp_f_i32 vcc, v2, v3
v_cmpx_f_i32 vcc, v2, v3
v_cmp_lt_i32 vcc, v2, v3
v_cmpx_lt_i32 vcc, v2, v3
v_cmp_eq_i32 vcc, v2, v3
v_cmpx_eq_i32 vcc, v2, v3
v_cmp_le_i32 vcc, v2, v3
v_cmpx_le_i32 vcc, v2, v3
v_cmp_gt_i32 vcc, v2, v3
v_cmpx_gt_i32 vcc, v2, v3
v_cmp_ne_i32 vcc, v2, v3
v_cmpx_ne_i32 vcc, v2, v3
v_cmp_ge_i32 vcc, v2, v3
v_cmpx_ge_i32 vcc, v2, v3
v_cmp_t_i32 vcc, v2, v3
v_cmpx_t_i32 vcc, v2, v3
v_cmp_f_u32 vcc, v2, v3
v_cmpx_f_u32 vcc, v2, v3
v_cmp_lt_u32 vcc, v2, v3
v_cmpx_lt_u32 vcc, v2, v3
v_cmp_eq_u32 vcc, v2, v3
v_cmpx_eq_u32 vcc, v2, v3
v_cmp_le_u32 vcc, v2, v3
v_cmpx_le_u32 vcc, v2, v3
v_cmp_gt_u32 vcc, v2, v3
v_cmpx_gt_u32 vcc, v2, v3
v_cmp_ne_u32 vcc, v2, v3
v_cmpx_ne_u32 vcc, v2, v3
v_cmp_ge_u32 vcc, v2, v3
v_cmpx_ge_u32 vcc, v2, v3
v_cmp_t_u32 vcc, v2, v3
v_cmpx_t_u32 vcc, v2, v3
v_cmp_f_i64 vcc, v[2:3], v[4:5]
v_cmpx_f_i64 vcc, v[2:3], v[4:5]
v_cmp_lt_i64 vcc, v[2:3], v[4:5]
v_cmpx_lt_i64 vcc, v[2:3], v[4:5]
v_cmp_eq_i64 vcc, v[2:3], v[4:5]
v_cmpx_eq_i64 vcc, v[2:3], v[4:5]
v_cmp_le_i64 vcc, v[2:3], v[4:5]
v_cmpx_le_i64 vcc, v[2:3], v[4:5]
v_cmp_gt_i64 vcc, v[2:3], v[4:5]
v_cmpx_gt_i64 vcc, v[2:3], v[4:5]
v_cmp_ne_i64 vcc, v[2:3], v[4:5]
v_cmpx_ne_i64 vcc, v[2:3], v[4:5]
v_cmp_ge_i64 vcc, v[2:3], v[4:5]
v_cmpx_ge_i64 vcc, v[2:3], v[4:5]
v_cmp_t_i64 vcc, v[2:3], v[4:5]
v_cmpx_t_i64 vcc, v[2:3], v[4:5]
v_cmp_f_u64 vcc, v[2:3], v[4:5]
v_cmpx_f_u64 vcc, v[2:3], v[4:5]
v_cmp_lt_u64 vcc, v[2:3], v[4:5]
v_cmpx_lt_u64 vcc, v[2:3], v[4:5]
v_cmp_eq_u64 vcc, v[2:3], v[4:5]
v_cmpx_eq_u64 vcc, v[2:3], v[4:5]
v_cmp_le_u64 vcc, v[2:3], v[4:5]
v_cmpx_le_u64 vcc, v[2:3], v[4:5]
v_cmp_gt_u64 vcc, v[2:3], v[4:5]
v_cmpx_gt_u64 vcc, v[2:3], v[4:5]
v_cmp_ne_u64 vcc, v[2:3], v[4:5]
v_cmpx_ne_u64 vcc, v[2:3], v[4:5]
v_cmp_ge_u64 vcc, v[2:3], v[4:5]
v_cmpx_ge_u64 vcc, v[2:3], v[4:5]
v_cmp_t_u64 vcc, v[2:3], v[4:5]
v_cmpx_t_u64 vcc, v[2:3], v[4:5]
v_mad_u32_u24 v1, v2, v3, v4
v_mad_i32_i24 v1, v2, v3, v4
v_bfe_u32 v1, v2, v3, v4
v_bfe_i32 v1, v2, v3, v4
v_bfi_b32 v1, v2, v3, v4
v_fma_f32 v1, v2, v3, v4
v_alignbit_b32 v1, v2, v3, v4
v_min3_f32 v1, v2, v3, v4
v_min3_i32 v1, v2, v3, v4
v_min3_u32 v1, v2, v3, v4
v_max3_f32 v1, v2, v3, v4
v_max3_i32 v1, v2, v3, v4
v_max3_u32 v1, v2, v3, v4
v_med3_i32 v1, v2, v3, v4
v_med3_u32 v1, v2, v3, v4
v_med3_f32 v1, v2, v3, v4
v_lshl_add_u32 v1, v2, v3, v4
v_add_lshl_u32 v1, v2, v3, v4
v_add3_u32 v1, v2, v3, v4
v_lshl_or_b32 v1, v2, v3, v4
v_and_or_b32 v1, v2, v3, v4
v_or3_b32 v1, v2, v3, v4
v_xad_u32 v1, v2, v3, v4
v_mul_lo_u32 v1, v2, v3
v_mul_hi_u32 v1, v2, v3
v_mul_hi_i32 v1, v2, v3
v_ldexp_f32 v1, v2, v3
v_bcnt_u32_b32 v1, v2, v3
v_mbcnt_lo_u32_b32 v1, v2, v3
v_mbcnt_hi_u32_b32 v1, v2, v3
v_readlane_b32 s1, v2, s3
v_writelane_b32 v1, s2, 3
v_fma_f64 v[2:3], v[4:5], v[6:7], v[8:9]
v_add_f64 v[2:3], v[4:5], v[6:7]
v_mul_f64 v[2:3], v[4:5], v[6:7]
v_min_f64 v[2:3], v[4:5], v[6:7]
v_max_f64 v[2:3], v[4:5], v[6:7]
v_ldexp_f64 v[2:3], v[4:5], v6
v_lshlrev_b64 v[2:3], v1, v[4:5]
v_lshrrev_b64 v[2:3], v1, v[4:5]
v_ashrrev_i64 v[2:3], v1, v[4:5]
v_mad_u64_u32 v[2:3], s[4:5], v1, v2, v[6:7]
v_mad_i64_i32 v[2:3], s[4:5], v1, v2, v[6:7]
ds_add_u32 v1, v2
ds_sub_u32 v1, v2
ds_min_i32 v1, v2
ds_max_i32 v1, v2
ds_min_u32 v1, v2
ds_max_u32 v1, v2
ds_and_b32 v1, v2
ds_or_b32 v1, v2
ds_xor_b32 v1, v2
ds_write_b32 v1, v2
ds_write_b8 v1, v2
ds_write_b16 v1, v2
ds_add_rtn_u32 v1, v2, v3
ds_sub_rtn_u32 v1, v2, v3
ds_min_rtn_u32 v1, v2, v3
ds_max_rtn_u32 v1, v2, v3
ds_and_rtn_b32 v1, v2, v3
ds_or_rtn_b32 v1, v2, v3
ds_xor_rtn_b32 v1, v2, v3
ds_wrxchg_rtn_b32 v1, v2, v3
ds_bpermute_b32 v1, v2, v3
ds_permute_b32 v1, v2, v3
ds_cmpst_rtn_b32 v1, v2, v3, v4
ds_write2_b32 v1, v2, v3 offset1:1
ds_write_b64 v1, v[2:3]
ds_write2_b64 v1, v[2:3], v[4:5] offset1:1
ds_write_b128 v1, v[4:7]
ds_read_b32 v1, v2
ds_read_u8 v1, v2
ds_read_i8 v1, v2
ds_read_u16 v1, v2
ds_read_i16 v1, v2
ds_read2_b32 v[2:3], v1 offset1:1
ds_read_b64 v[2:3], v1
ds_read2_b64 v[4:7], v1 offset1:1
ds_read_b128 v[4:7], v1
ds_swizzle_b32 v1, v2 offset:0x41f
flat_load_ubyte v1, v[2:3]
flat_load_sbyte v1, v[2:3]
flat_load_ushort v1, v[2:3]
flat_load_sshort v1, v[2:3]
flat_load_dword v1, v[2:3]
flat_load_dwordx2 v[4:5], v[2:3]
flat_load_dwordx3 v[4:6], v[2:3]
flat_load_dwordx4 v[4:7], v[2:3]
flat_store_byte v[2:3], v1
flat_store_short v[2:3], v1
flat_store_dword v[2:3], v1
flat_store_dwordx2 v[2:3], v[4:5]
flat_store_dwordx3 v[2:3], v[4:6]
flat_store_dwordx4 v[2:3], v[4:7]
flat_atomic_swap v1, v[2:3], v1 glc
flat_atomic_cmpswap v1, v[2:3], v[4:5] glc
flat_atomic_add v1, v[2:3], v1 glc
flat_atomic_sub v1, v[2:3], v1 glc
flat_atomic_smin v1, v[2:3], v1 glc
flat_atomic_umin v1, v[2:3], v1 glc
flat_atomic_smax v1, v[2:3], v1 glc
flat_atomic_umax v1, v[2:3], v1 glc
flat_atomic_and v1, v[2:3], v1 glc
flat_atomic_or v1, v[2:3], v1 glc
flat_atomic_xor v1, v[2:3], v1 glc
flat_atomic_inc v1, v[2:3], v1 glc
flat_atomic_dec v1, v[2:3], v1 glc
flat_atomic_swap_x2 v[6:7], v[2:3], v[4:5] glc
flat_atomic_add_x2 v[6:7], v[2:3], v[4:5] glc
flat_atomic_cmpswap_x2 v[6:7], v[2:3], v[4:7] glc
flat_atomic_smin_x2 v[6:7], v[2:3], v[4:5] glc
flat_atomic_umin_x2 v[6:7], v[2:3], v[4:5] glc
flat_atomic_smax_x2 v[6:7], v[2:3], v[4:5] glc
flat_atomic_umax_x2 v[6:7], v[2:3], v[4:5] glc
flat_atomic_add_f64 v[6:7], v[2:3], v[4:5] glc
global_load_ubyte v1, v[2:3], off
global_load_sbyte v1, v[2:3], off
global_load_ushort v1, v[2:3], off
global_load_sshort v1, v[2:3], off
global_load_dword v1, v[2:3], off
global_load_dwordx2 v[4:5], v[2:3], off
global_load_dwordx3 v[4:6], v[2:3], off
global_load_dwordx4 v[4:7], v[2:3], off
global_store_byte v[2:3], v1, off
global_store_short v[2:3], v1, off
global_store_dword v[2:3], v1, off
global_store_dwordx2 v[2:3], v[4:5], off
global_store_dwordx3 v[2:3], v[4:6], off
global_store_dwordx4 v[2:3], v[4:7], off
global_atomic_swap v1, v[2:3], v1, off glc
global_atomic_cmpswap v1, v[2:3], v[4:5], off glc
global_atomic_add v1, v[2:3], v1, off glc
global_atomic_sub v1, v[2:3], v1, off glc
global_atomic_smin v1, v[2:3], v1, off glc
global_atomic_umin v1, v[2:3], v1, off glc
global_atomic_smax v1, v[2:3], v1, off glc
global_atomic_umax v1, v[2:3], v1, off glc
global_atomic_and v1, v[2:3], v1, off glc
global_atomic_or v1, v[2:3], v1, off glc
global_atomic_xor v1, v[2:3], v1, off glc
global_atomic_inc v1, v[2:3], v1, off glc
global_atomic_dec v1, v[2:3], v1, off glc
global_atomic_swap_x2 v[6:7], v[2:3], v[4:5], off glc
global_atomic_add_x2 v[6:7], v[2:3], v[4:5], off glc
global_atomic_cmpswap_x2 v[6:7], v[2:3], v[4:7], off glc
global_atomic_smin_x2 v[6:7], v[2:3], v[4:5], off glc
global_atomic_umin_x2 v[6:7], v[2:3], v[4:5], off glc
global_atomic_smax_x2 v[6:7], v[2:3], v[4:5], off glc
global_atomic_umax_x2 v[6:7], v[2:3], v[4:5], off glc
global_atomic_add_f32 v1, v[2:3], v4, off glc
global_atomic_add_f64 v[6:7], v[2:3], v[4:5], off glc
scratch_load_ubyte v1, v2, off
scratch_load_sbyte v1, v2, off
scratch_load_ushort v1, v2, off
scratch_load_sshort v1, v2, off
scratch_load_dword v1, v2, off
scratch_load_dwordx2 v[4:5], v2, off
scratch_load_dwordx3 v[4:6], v2, off
scratch_load_dwordx4 v[4:7], v2, off
scratch_store_byte v2, v1, off
scratch_store_short v2, v1, off
scratch_store_dword v2, v1, off
scratch_store_dwordx2 v2, v[4:5], off
scratch_store_dwordx3 v2, v[4:6], off
scratch_store_dwordx4 v2, v[4:7], off
buffer_wbl2
buffer_wbinvl1_vol
v_add_u32_dpp v1, v1, v1 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
v_add_u32_dpp v1, v1, v1 row_bcast:15 row_mask:0xa bank_mask:0xf
v_add_u32_dpp v1, v1, v1 row_bcast:31 row_mask:0xc bank_mask:0xf
v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 wave_shr:1 row_mask:0xf bank_mask:0xf
v_add_f32_dpp v1, v2, v3 row_mirror row_mask:0xf bank_mask:0xf
v_cndmask_b32_e64 v1, v2, v3, s[4:5]
v_cmp_lt_u32_e64 s[4:5], v1, v2
v_cmpx_eq_u32_e64 s[4:5], v1, v2
v_add_co_u32_e64 v1, s[4:5], v2, v3
v_addc_co_u32_e64 v1, s[4:5], v2, v3, s[6:7]
v_mov_b32_e64 v1, s2
v_add_f32_e64 v1, |v2|, -v3
v_add_f64 v[2:3], -v[4:5], 0.5
global_load_dword v1, v2, s[4:5] offset:-8
scratch_load_dword v1, off, s2 offset:16
flat_load_dword v1, v[2:3] offset:16
ds_read_b32 v1, v2 offset:64
s_load_dword s1, s[2:3], s4
s_mov_b32 s1, 0x12345678
v_mov_b32_e32 v1, 0x12345678
s_mov_b64 s[0:1], src_private_base
buffer_load_ubyte v1, off, s[0:3], 0
buffer_load_sbyte v1, off, s[0:3], 0
buffer_load_ushort v1, off, s[0:3], 0
buffer_load_sshort v1, off, s[0:3], 0
buffer_load_dword v1, v2, s[0:3], s4 offen offset:8
buffer_load_dwordx2 v[2:3], off, s[0:3], 0
buffer_load_dwordx3 v[2:4], off, s[0:3], 0
buffer_load_dwordx4 v[2:5], off, s[0:3], 0
buffer_store_byte v1, off, s[0:3], 0
buffer_store_short v1, off, s[0:3], 0
buffer_store_dword v1, off, s[0:3], 0 offset:16
buffer_store_dwordx2 v[2:3], off, s[0:3], 0
buffer_store_dwordx3 v[2:4], off, s[0:3], 0
buffer_store_dwordx4 v[2:5], v1, s[0:3], s5 offen
v_pk_mov_b32 v[0:1], v[2:3], v[4:5] op_sel:[1,0]
v_pk_mov_b32 v[6:7], v[2:3], v[2:3] op_sel:[0,1]
ds_write2st64_b32 v1, v2, v3 offset1:1
ds_write2st64_b64 v1, v[2:3], v[4:5] offset1:1
ds_read2st64_b32 v[2:3], v1 offset1:1
ds_read2st64_b64 v[4:7], v1 offset1:1
ds_add_f32 v1, v2
ds_add_rtn_f32 v1, v2, v3
ds_add_f64 v1, v[2:3]
ds_add_rtn_f64 v[2:3], v1, v[4:5]
ds_cmpst_rtn_b64 v[2:3], v1, v[4:5], v[6:7]
ds_read_b96 v[4:6], v1
ds_write_b96 v1, v[4:6]
ds_add_u64 v1, v[2:3]
ds_add_rtn_u64 v[2:3], v1, v[4:5]
s_bfe_i64 s[2:3], s[4:5], s6
v_cvt_f32_ubyte0_e32 v1, v2
v_add_u16_e32 v1, v2, v3
v_sub_u16_e32 v1, v2, v3
v_mul_lo_u16_e32 v1, v2, v3
v_lshrrev_b16_e32 v1, v2, v3
v_lshlrev_b16_e32 v1, v2, v3
v_min_u16_e32 v1, v2, v3
v_max_u16_e32 v1, v2, v3
v_sub_u16_e64 v3, v0, 3
v_cmp_f_i16 vcc, v1, v2
v_cmpx_f_i16 vcc, v1, v2
v_cmp_lt_i16 vcc, v1, v2
v_cmpx_lt_i16 vcc, v1, v2
v_cmp_eq_i16 vcc, v1, v2
v_cmpx_eq_i16 vcc, v1, v2
v_cmp_le_i16 vcc, v1, v2
v_cmpx_le_i16 vcc, v1, v2
v_cmp_gt_i16 vcc, v1, v2
v_cmpx_gt_i16 vcc, v1, v2
v_cmp_ne_i16 vcc, v1, v2
v_cmpx_ne_i16 vcc, v1, v2
v_cmp_ge_i16 vcc, v1, v2
v_cmpx_ge_i16 vcc, v1, v2
v_cmp_t_i16 vcc, v1, v2
v_cmpx_t_i16 vcc, v1, v2
v_cmp_f_u16 vcc, v1, v2
v_cmpx_f_u16 vcc, v1, v2
v_cmp_lt_u16 vcc, v1, v2
v_cmpx_lt_u16 vcc, v1, v2
v_cmp_eq_u16 vcc, v1, v2
v_cmpx_eq_u16 vcc, v1, v2
v_cmp_le_u16 vcc, v1, v2
v_cmpx_le_u16 vcc, v1, v2
v_cmp_gt_u16 vcc, v1, v2
v_cmpx_gt_u16 vcc, v1, v2
v_cmp_ne_u16 vcc, v1, v2
v_cmpx_ne_u16 vcc, v1, v2
v_cmp_ge_u16 vcc, v1, v2
v_cmpx_ge_u16 vcc, v1, v2
v_cmp_t_u16 vcc, v1, v2
v_cmpx_t_u16 vcc, v1, v2
v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7]
v_pk_fma_f16 v0, v1, v2, v3
v_pk_fma_f16 v0, v1, s2, v3 op_sel:[1,0,1] op_sel_hi:[0,1,0] neg_lo:[1,0,0] neg_hi:[0,1,1]
v_fma_mix_f32 v0, v1, s2, v3
v_fma_mix_f32 v0, -v1, |v2|, -|v3| op_sel:[1,0,1] op_sel_hi:[1,0,1]
v_fma_mixlo_f16 v0, v1, s2, s2
v_fma_mixlo_f16 v0, v1, v2, v3 op_sel:[0,1,0] op_sel_hi:[1,1,1]
v_fma_mixhi_f16 v0, v1, v2, v3 op_sel_hi:[1,1,1]
v_pk_mul_f32 v[0:1], v[2:3], v[4:5]
v_pk_add_f32 v[0:1], v[2:3], v[4:5]
v_mac_f32_e32 v1, v2, v3
v_mad_f32 v1, v2, v3, v4
v_add_u32_sdwa v3, v4, v4 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_0 src1_sel:WORD_1
v_cmp_ne_u16_sdwa vcc, v4, v5 src0_sel:BYTE_0 src1_sel:WORD_0
v_mov_b32_sdwa v7, v4 dst_sel:BYTE_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_3
v_mul_u32_u24_sdwa v1, v2, v3 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0 src1_sel:WORD_1
v_cvt_f32_u32_sdwa v1, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_2
v_div_scale_f32 v1, vcc, v2, v3, v4
v_div_scale_f64 v[2:3], vcc, v[4:5], v[6:7], v[8:9]
v_div_fmas_f32 v1, v2, v3, v4
v_div_fmas_f64 v[2:3], v[4:5], v[6:7], v[8:9]
v_div_fixup_f32 v1, v2, v3, v4
v_div_fixup_f64 v[2:3], v[4:5], v[6:7], v[8:9]
v_cmp_class_f32 vcc, v1, v2
v_cmpx_class_f32 vcc, v1, v2
v_cmp_class_f64 vcc, v[2:3], v1
v_cmpx_class_f64 vcc, v[2:3], v1
v_cvt_f16_f32_e32 v1, v2
v_cvt_f32_f16_e32 v1, v2
v_cvt_f16_u16_e32 v1, v2
v_cvt_u16_f16_e32 v1, v2
v_add_f16_e32 v1, v2, v3
v_sub_f16_e32 v1, v2, v3
v_mul_f16_e32 v1, v2, v3
v_max_f16_e32 v1, v2, v3
v_min_f16_e32 v1, v2, v3
v_fma_f16 v1, v2, v3, v4
v_pack_b32_f16 v1, v2, -v3
v_cmp_f_f16 vcc, v1, v2
v_cmpx_f_f16 vcc, v1, v2
v_cmp_lt_f16 vcc, v1, v2
v_cmpx_lt_f16 vcc, v1, v2
v_cmp_eq_f16 vcc, v1, v2
v_cmpx_eq_f16 vcc, v1, v2
v_cmp_le_f16 vcc, v1, v2
v_cmpx_le_f16 vcc, v1, v2
v_cmp_gt_f16 vcc, v1, v2
v_cmpx_gt_f16 vcc, v1, v2
v_cmp_lg_f16 vcc, v1, v2
v_cmpx_lg_f16 vcc, v1, v2
v_cmp_ge_f16 vcc, v1, v2
v_cmpx_ge_f16 vcc, v1, v2
v_cmp_o_f16 vcc, v1, v2
v_cmpx_o_f16 vcc, v1, v2
v_cmp_u_f16 vcc, v1, v2
v_cmpx_u_f16 vcc, v1, v2
v_cmp_nge_f16 vcc, v1, v2
v_cmpx_nge_f16 vcc, v1, v2
v_cmp_nlg_f16 vcc, v1, v2
v_cmpx_nlg_f16 vcc, v1, v2
v_cmp_ngt_f16 vcc, v1, v2
v_cmpx_ngt_f16 vcc, v1, v2
v_cmp_nle_f16 vcc, v1, v2
v_cmpx_nle_f16 vcc, v1, v2
v_cmp_neq_f16 vcc, v1, v2
v_cmpx_neq_f16 vcc, v1, v2
v_cmp_nlt_f16 vcc, v1, v2
v_cmpx_nlt_f16 vcc, v1, v2
v_cmp_tru_f16 vcc, v1, v2
v_cmpx_tru_f16 vcc, v1, v2
global_store_short_d16_hi v[2:3], v1, off
global_store_byte_d16_hi v[2:3], v1, off
flat_store_short_d16_hi v[2:3], v1
scratch_store_short_d16_hi v2, v1, off
ds_min_u64 v1, v[2:3]
ds_max_u64 v1, v[2:3]
ds_min_rtn_u64 v[2:3], v1, v[4:5]
ds_max_rtn_u64 v[2:3], v1, v[4:5]
v_cmp_class_f16_e64 s[0:1], v1, v2
v_cmpx_class_f16 vcc, v1, v2
v_sqrt_f16_e32 v1, v2
v_frexp_exp_i32_f64_e32 v1, v[2:3]
v_frexp_mant_f64_e32 v[2:3], v[4:5]
v_frexp_exp_i32_f32_e32 v1, v2
v_frexp_mant_f32_e32 v1, v2
