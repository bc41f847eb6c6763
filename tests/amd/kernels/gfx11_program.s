// gfx11_program.s — a program for the interpreter's semantics test (test_gfx11.cpp): one
// wave of one lane, s[0:1] the address of 32 output dwords. Each block computes a value and
// stores it at out[k]; the test compares with what the RDNA3 ISA says it must be.
// v0 holds the work-item id (0); v1 carries values to the stores.
  s_mov_b32 s2, -1
  s_add_u32 s2, s2, 2             // 1, carry out
  s_addc_u32 s3, 0, 0             // 0 + 0 + carry = 1
  v_mov_b32 v1, s2
  global_store_b32 v0, v1, s[0:1]            // out[0] = 1
  v_mov_b32 v1, s3
  global_store_b32 v0, v1, s[0:1] offset:4   // out[1] = 1
  s_sub_u32 s4, 1, 2              // borrow
  s_cselect_b32 s4, 7, 9
  v_mov_b32 v1, s4
  global_store_b32 v0, v1, s[0:1] offset:8   // out[2] = 7
  s_mov_b64 s[6:7], 1
  s_lshl_b64 s[6:7], s[6:7], 35
  v_mov_b32 v1, s7
  global_store_b32 v0, v1, s[0:1] offset:12  // out[3] = 8
  s_movk_i32 s8, 0x4
  s_or_b32 s8, s8, 0x80000        // offset 4, width 8
  s_bfe_u32 s9, 0xabcd, s8
  v_mov_b32 v1, s9
  global_store_b32 v0, v1, s[0:1] offset:16  // out[4] = 0xbc
  s_mul_hi_u32 s10, 0x80000000, 4
  v_mov_b32 v1, s10
  global_store_b32 v0, v1, s[0:1] offset:20  // out[5] = 2
  s_mov_b32 s11, 11
  s_cmp_lt_i32 -1, 1
  s_cbranch_scc1 skip
  s_mov_b32 s11, 99
skip:
  v_mov_b32 v1, s11
  global_store_b32 v0, v1, s[0:1] offset:24  // out[6] = 11
  v_mov_b32 v2, 0x40400000        // 3.0
  v_mov_b32 v3, 0x40000000        // 2.0
  v_add_f32 v1, v2, v3
  global_store_b32 v0, v1, s[0:1] offset:28  // out[7] = 5.0f
  v_fma_f32 v1, v2, v3, -1.0
  global_store_b32 v0, v1, s[0:1] offset:32  // out[8] = 5.0f
  v_mov_b32 v4, 0x10000
  v_mov_b32 v5, 3
  v_mov_b32 v6, 0
  v_mad_u64_u32 v[6:7], null, v4, v4, v[5:6]
  v_mov_b32 v1, v7
  global_store_b32 v0, v1, s[0:1] offset:36  // out[9] = 1 (high dword of 2^32 + 3)
  v_mov_b32 v1, v6
  global_store_b32 v0, v1, s[0:1] offset:40  // out[10] = 3
  v_mov_b32 v8, 5
  v_mov_b32 v9, 0
  v_lshlrev_b64 v[8:9], 33, v[8:9]
  v_mov_b32 v1, v9
  global_store_b32 v0, v1, s[0:1] offset:44  // out[11] = 10
  v_cmp_gt_u32 vcc_lo, 5, v5
  v_cndmask_b32 v1, 20, 21, vcc_lo
  global_store_b32 v0, v1, s[0:1] offset:48  // out[12] = 21 (5 > 3)
  v_bfe_i32 v1, 0xf0, 4, 4
  global_store_b32 v0, v1, s[0:1] offset:52  // out[13] = -1
  v_cvt_f32_u32 v1, 7
  v_cvt_u32_f32 v1, v1
  global_store_b32 v0, v1, s[0:1] offset:56  // out[14] = 7
  v_mov_b32 v10, 0x1234
  ds_store_b32 v0, v10 offset:8
  ds_load_b32 v1, v0 offset:8
  s_waitcnt lgkmcnt(0)
  global_store_b32 v0, v1, s[0:1] offset:60  // out[15] = 0x1234
  v_mov_b32 v11, 5
  ds_store_2addr_b32 v0, v10, v11 offset0:4 offset1:5
  ds_load_2addr_b32 v[12:13], v0 offset0:4 offset1:5
  s_waitcnt lgkmcnt(0)
  v_add_nc_u32 v1, v12, v13
  global_store_b32 v0, v1, s[0:1] offset:64  // out[16] = 0x1239
  v_sub_co_u32 v1, vcc_lo, 1, 2
  v_subrev_co_ci_u32 v14, vcc_lo, 0, 0, vcc_lo  // 0 - 0 - borrow = -1
  global_store_b32 v0, v14, s[0:1] offset:68 // out[17] = 0xffffffff
  s_mov_b32 s12, 0
  s_mov_b32 s13, 5
loop:
  s_add_i32 s12, s12, s13
  s_add_i32 s13, s13, -1
  s_cmp_lg_u32 s13, 0
  s_cbranch_scc1 loop
  v_mov_b32 v1, s12
  global_store_b32 v0, v1, s[0:1] offset:72  // out[18] = 15
  v_mov_b32 v15, 0x80
  v_readfirstlane_b32 s14, v15
  s_ctz_i32_b32 s15, s14
  v_mov_b32 v1, s15
  global_store_b32 v0, v1, s[0:1] offset:76  // out[19] = 7
  s_load_b32 s16, s[0:1], 0x0               // out[0], stored above: 1
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v1, s16
  global_store_b32 v0, v1, s[0:1] offset:80  // out[20] = 1
  v_dual_mov_b32 v16, 3 :: v_dual_add_nc_u32 v17, 4, v5
  v_add_nc_u32 v1, v16, v17
  global_store_b32 v0, v1, s[0:1] offset:84  // out[21] = 3 + 4 + 3 = 10
  s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)
  s_endpgm
