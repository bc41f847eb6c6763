// gfx9_program.s — a program for the CDNA interpreter's semantics test (test_gfx9.cpp): one
// wave of 64 lanes, s[0:1] the address of the output (26 blocks of 64 dwords, block k at byte k * 256; blocks 17 on are
// stored through s[24:25], the address of block 16),
// v0 the lane's work-item id. Each block computes a value per lane (or one in lane 0) and
// stores it; the test compares with what the MI300 ISA says it must be.
  v_lshlrev_b32 v10, 2, v0                // v10: the lane's byte offset in a block
  s_mov_b64 s[20:21], exec
// Block 0: 64-bit compare to an SGPR pair, then v_cndmask from it (lanes >= 40 get 1).
  v_mov_b32 v3, 0
  v_mov_b32 v2, v0                        // v[2:3] = lane as a 64-bit value
  s_mov_b64 s[4:5], 39
  v_cmp_gt_u64_e64 s[6:7], v[2:3], s[4:5]
  v_cndmask_b32_e64 v3, 0, 1, s[6:7]
  global_store_dword v10, v3, s[0:1]
// Block 1: the mask itself as lane 0's pair: out[0..1] = s[6:7] (0xffffff00_00000000).
  v_mov_b32 v4, s6
  v_mov_b32 v5, s7
  v_mov_b32 v6, 0
  global_store_dwordx2 v6, v[4:5], s[0:1] offset:256
// Block 2: v_cmpx narrows EXEC to lanes < 8 (and writes VCC); those store 2, EXEC comes back.
  v_cmpx_gt_u32_e32 vcc, 8, v0
  v_mov_b32 v3, 2
  global_store_dword v10, v3, s[0:1] offset:512
  s_mov_b64 exec, s[20:21]
// Block 3: carries across 64 bits: (lane + 0xffffffff) with v_add_co/v_addc_co; stores the high dword.
  v_add_co_u32_e32 v3, vcc, -1, v0
  v_mov_b32 v9, 0
  v_addc_co_u32_e32 v4, vcc, 0, v9, vcc
  global_store_dword v10, v4, s[0:1] offset:768
// Block 4: f64: fma(lane, 0.5, -lane * 2^-3) as f64, converted to f32.
  v_cvt_f64_u32_e32 v[4:5], v0
  v_mul_f64 v[6:7], v[4:5], 0.5
  v_ldexp_f64 v[8:9], v[4:5], -3
  v_fma_f64 v[6:7], v[4:5], 0.5, -v[8:9]
  v_cvt_f32_f64_e32 v3, v[6:7]
  global_store_dword v10, v3, s[0:1] offset:1024
// Block 5: DPP row_shr:1 with bound_ctrl (lane 0 of each row reads 0): v3 = lane + left neighbour.
  v_add_u32_dpp v3, v0, v0 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
  global_store_dword v10, v3, s[0:1] offset:1280
// Block 6: DPP row_bcast:15 into rows 1 and 3 only (row_mask 0xa): other rows keep 100.
  v_mov_b32 v3, 100
  v_mov_b32_dpp v3, v0 row_bcast:15 row_mask:0xa bank_mask:0xf
  global_store_dword v10, v3, s[0:1] offset:1536
// Block 7: DPP quad_perm [3,2,1,0], then wave_shr:1 without bound_ctrl (lane 0 keeps 7).
  v_mov_b32_dpp v3, v0 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf
  v_mov_b32 v4, 7
  v_mov_b32_dpp v4, v3 wave_shr:1 row_mask:0xf bank_mask:0xf
  global_store_dword v10, v4, s[0:1] offset:1792
// Block 8: ds_swizzle quad mode [1,0,3,2] of lane * 3; ds_bpermute from lane 63 - lane.
  v_mul_u32_u24_e32 v3, 3, v0
  ds_swizzle_b32 v4, v3 offset:swizzle(QUAD_PERM,1,0,3,2)
  v_sub_u32_e32 v5, 63, v0
  v_lshlrev_b32 v5, 2, v5
  ds_bpermute_b32 v6, v5, v3
  v_lshl_or_b32 v4, v6, 16, v4            // (bpermuted << 16) | swizzled
  s_waitcnt lgkmcnt(0)
  global_store_dword v10, v4, s[0:1] offset:2048
// Block 9: LDS write2/read2 and b128: each lane writes lane, lane + 1000 at its pair, reads back the pair of lane ^ 1.
  v_lshlrev_b32 v5, 3, v0
  v_add_u32_e32 v6, 0x3e8, v0
  ds_write2_b32 v5, v0, v6 offset1:1
  v_xor_b32_e32 v7, 1, v0
  v_lshlrev_b32 v7, 3, v7
  ds_read2_b32 v[8:9], v7 offset1:1
  v_add_u32_e32 v8, v8, v9                // (lane ^ 1) + (lane ^ 1) + 1000
  global_store_dword v10, v8, s[0:1] offset:2304
// Block 10: ds_add_rtn_u32 on one LDS word from every lane, starting at 5: lane 0 sees 5 + 0 + ... in lane order.
  v_mov_b32 v5, 0x200
  v_mov_b32 v6, 5
  s_mov_b64 exec, 1
  ds_write_b32 v5, v6
  s_mov_b64 exec, s[20:21]
  v_mov_b32 v6, 1
  ds_add_rtn_u32 v7, v5, v6
  global_store_dword v10, v7, s[0:1] offset:2560
// Block 11: scalar: s_ff1_i32_b64 of the block 0 mask (40), s_bcnt1 (24), s_flbit of 1 << 20 (11), s_lshl2_add_u32 (4 * 3 + 1).
  s_ff1_i32_b64 s8, s[6:7]
  s_bcnt1_i32_b64 s9, s[6:7]
  s_flbit_i32_b32 s10, 0x100000
  s_lshl2_add_u32 s11, 3, 1
  v_mov_b32 v4, s8
  v_mov_b32 v5, s9
  v_mov_b32 v6, s10
  v_mov_b32 v7, s11
  v_mov_b32 v3, 0
  global_store_dwordx4 v3, v[4:7], s[0:1] offset:2816
// Block 12: 64-bit shifts and v_mad_u64_u32: (lane << 33) >> 1 high dword (lane), and lane * 0x80000000 + 3 high dword.
  v_mov_b32 v2, v0
  v_mov_b32 v3, 0
  v_lshlrev_b64 v[4:5], 33, v[2:3]
  v_lshrrev_b64 v[4:5], 1, v[4:5]
  v_mov_b32 v7, 0x80000000
  v_mov_b32 v8, 3
  v_mov_b32 v9, 0
  v_mad_u64_u32 v[8:9], s[8:9], v0, v7, v[8:9]
  v_add_u32_e32 v6, v5, v9                // lane + lane / 2
  global_store_dword v10, v6, s[0:1] offset:3072
// Block 13: scratch through an SGPR offset and a VGPR address: lane * 7 at private byte 8 + 4, read back.
  v_mul_u32_u24_e32 v3, 7, v0
  s_mov_b32 s12, 8
  scratch_store_dword off, v3, s12 offset:4
  v_mov_b32 v4, 12
  scratch_load_dword v5, v4, off
  global_store_dword v10, v5, s[0:1] offset:3328
// Block 14: a call: s_getpc/s_swappc to a subroutine that doubles v3 and returns by s_setpc.
  v_mov_b32 v3, v0
  s_getpc_b64 s[14:15]
  s_add_u32 s14, s14, double_v3 - .
  s_addc_u32 s15, s15, 0
  s_swappc_b64 s[16:17], s[14:15]
  global_store_dword v10, v3, s[0:1] offset:3584
// Block 15: global atomic_add on block 16's first word (from 10, + lane): each lane's pre-op value, in lane order.
// Block 16: the word (then 2026), and lane 0's cmpswap of it from 2026 to 77: out[0] = 77, out[1] = 2026.
  v_mov_b32 v3, 10
  v_mov_b32 v4, 0x1000                   // block 16
  s_mov_b64 exec, 1
  global_store_dword v4, v3, s[0:1]
  s_mov_b64 exec, s[20:21]
  global_atomic_add v5, v4, v0, s[0:1] sc0
  v_mov_b32 v6, 77                        // the new value
  v_mov_b32 v7, 0x7ea                     // compared: 10 + 0 + 1 + ... + 63 = 2026
  s_mov_b64 exec, 1
  global_atomic_cmpswap v8, v4, v[6:7], s[0:1] sc0
  global_store_dword v4, v8, s[0:1] offset:4
  s_mov_b64 exec, s[20:21]
  global_store_dword v10, v5, s[0:1] offset:3840
// Block 17: packed f32 on v[4:5] = (lane, 2 lane): v[6:7] = (lane^2, 4 lane^2) by v_pk_mul_f32;
// v_pk_add_f32 with op_sel:[1,0] and neg_hi:[0,1] gives v[8:9] = (2 lane + lane^2, 2 lane - 4 lane^2);
// v_pk_fma_f32 gives (2 lane^2 + 2 lane, 2 lane); their sum as an integer, 2 lane^2 + 4 lane.
  s_add_u32 s24, s0, 0x1000
  s_addc_u32 s25, s1, 0
  v_cvt_f32_u32_e32 v4, v0
  v_add_f32_e32 v5, v4, v4
  v_pk_mul_f32 v[6:7], v[4:5], v[4:5]
  v_pk_add_f32 v[8:9], v[4:5], v[6:7] op_sel:[1,0] op_sel_hi:[1,1] neg_hi:[0,1]
  v_pk_fma_f32 v[6:7], v[4:5], v[4:5], v[8:9]
  v_add_f32_e32 v3, v6, v7
  v_cvt_u32_f32_e32 v3, v3
  global_store_dword v10, v3, s[24:25] offset:256
// Block 18: 16-bit integers: (lane - 3) as u16 (wraps below 3), and v_cmp_lt_u16 of it against 100 into the top bit.
  v_sub_u16_e64 v3, v0, 3
  v_cmp_gt_u16_e32 vcc, 0x64, v3
  v_cndmask_b32_e64 v4, 0, 1, vcc
  v_lshl_or_b32 v3, v4, 31, v3
  global_store_dword v10, v3, s[24:25] offset:512
// Block 19: LDS: write2st64 of (lane, lane + 7) 256 bytes apart, read2st64 back; ds_add_f32 of 0.5 per lane on one word
//   (from 1.0) returning the old value; ds_add_rtn_u64 of 2^32 + 1 per lane on a pair (from 0); packed
//   as (lane << 16) | ((1 + lane / 2) << 8) | (3 lane + 7).
  v_lshlrev_b32 v5, 2, v0
  v_add_u32_e32 v6, 7, v0
  ds_write2st64_b32 v5, v0, v6 offset1:1
  ds_read2st64_b32 v[6:7], v5 offset1:1
  v_add_u32_e32 v3, v6, v7                // 2 lane + 7
  v_mov_b32 v8, 0x300
  v_mov_b32 v9, 1.0
  v_mov_b32 v12, 0
  v_mov_b32 v13, 0
  s_mov_b64 exec, 1
  ds_write_b32 v8, v9
  ds_write_b64 v8, v[12:13] offset:8
  s_mov_b64 exec, s[20:21]
  v_mov_b32 v9, 0.5
  ds_add_rtn_f32 v11, v8, v9
  v_cvt_u32_f32_e32 v11, v11              // 1 + lane / 2, truncated
  v_mov_b32 v12, 1
  v_mov_b32 v13, 1
  ds_add_rtn_u64 v[12:13], v8, v[12:13] offset:8   // lane, lane
  v_lshlrev_b32 v11, 8, v11
  v_lshl_or_b32 v3, v13, 16, v3
  v_or_b32_e32 v3, v3, v11
  v_add_u32_e32 v3, v3, v12
  global_store_dword v10, v3, s[24:25] offset:768
// Block 20: s_bfe_i64 of bits 32..39 of 0xff80_0000_0000 (sign-extended: -128), v_fma_f32, v_fmac_f32, v_cvt_f32_ubyte0.
  s_mov_b32 s22, 0
  s_mov_b32 s23, 0xff80
  s_bfe_i64 s[22:23], s[22:23], 0x80020
  v_mov_b32 v4, s22
  v_mov_b32 v5, 0x40400000                // 3.0
  v_fma_f32 v6, v5, v5, 1.0               // 10
  v_fmac_f32_e32 v6, v5, v5               // 19
  v_mov_b32 v7, 0x1234
  v_cvt_f32_ubyte0_e32 v7, v7             // 52.0
  v_add_f32_e32 v6, v6, v7                // 71
  v_cvt_i32_f32_e32 v6, v6
  v_add_u32_e32 v3, v4, v6                // -128 + 71 = -57
  global_store_dword v10, v3, s[24:25] offset:1024
// Block 21: SDWA: v4 = 0xabcd0000 | lane; lane + 0xabcd into word 1 of v3 (0x11111111, its
// word 0 kept), its bit 0 flipped where v_cmp_ne_u16_sdwa finds byte 0 of v4 unlike 5.
// Block 22: byte 3 of v4 (0xab) into byte 0, sign-extended above: 0xffffffab.
  v_mov_b32 v4, 0xabcd0000
  v_or_b32_e32 v4, v4, v0
  v_mov_b32 v3, 0x11111111
  v_add_u32_sdwa v3, v4, v4 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_0 src1_sel:WORD_1
  v_mov_b32 v5, 5
  v_cmp_ne_u16_sdwa vcc, v4, v5 src0_sel:BYTE_0 src1_sel:WORD_0
  v_cndmask_b32_e64 v6, 0, 1, vcc
  v_xor_b32_e32 v3, v3, v6
  global_store_dword v10, v3, s[24:25] offset:1280
  v_mov_b32 v7, 0
  v_mov_b32_sdwa v7, v4 dst_sel:BYTE_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_3
  global_store_dword v10, v7, s[24:25] offset:1536
// Block 23: frexp of lane + 1 as f64: exponent e | (mantissa * 4096) << 8.
  v_cvt_f64_u32_e32 v[4:5], v0
  v_add_f64 v[4:5], v[4:5], 1.0
  v_frexp_exp_i32_f64_e32 v3, v[4:5]
  v_frexp_mant_f64_e32 v[6:7], v[4:5]
  v_ldexp_f64 v[6:7], v[6:7], 12
  v_cvt_u32_f64_e32 v8, v[6:7]
  v_lshl_or_b32 v3, v8, 8, v3
  global_store_dword v10, v3, s[24:25] offset:1792
// Block 24: the upper half of (lane << 16) | 0xffff by global_store_short_d16_hi into a zero dword: lane.
  v_lshlrev_b32_e32 v3, 16, v0
  v_or_b32_e32 v3, 0xffff, v3
  global_store_short_d16_hi v10, v3, s[24:25] offset:2048
// Block 25: sqrt in f16 of (lane & 31)^2, back to an integer, | (whether f16(lane - 32) is a negative normal) << 8.
  v_and_b32_e32 v3, 31, v0
  v_mul_u32_u24_e32 v4, v3, v3
  v_cvt_f32_u32_e32 v4, v4
  v_cvt_f16_f32_e32 v4, v4
  v_sqrt_f16_e32 v4, v4
  v_cvt_f32_f16_e32 v4, v4
  v_cvt_u32_f32_e32 v4, v4
  v_subrev_u32_e32 v5, 32, v0
  v_cvt_f32_i32_e32 v5, v5
  v_cvt_f16_f32_e32 v5, v5
  v_mov_b32 v6, 8                         // the class mask: -normal
  v_cmp_class_f16_e64 s[26:27], v5, v6
  v_cndmask_b32_e64 v6, 0, 1, s[26:27]
  v_lshl_or_b32 v4, v6, 8, v4
  global_store_dword v10, v4, s[24:25] offset:2304
  s_endpgm
double_v3:
  v_add_u32_e32 v3, v3, v3
  s_setpc_b64 s[16:17]
