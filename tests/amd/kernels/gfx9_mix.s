// gfx9_mix.s — a program for the CDNA interpreter's f16, mixed-precision and trigonometric
// semantics test (test_gfx9.cpp): one wave of 64 lanes; s[0:1] the address of the inputs (four
// dwords a, b, c, d per lane, lane k's at byte 16 * k), s[2:3] the address of the output (12
// blocks of 64 dwords, block k at byte 256 * k), v0 the lane's work-item id. Each block stores
// one instruction's result per lane; the test computes the same on the host.
  v_lshlrev_b32 v1, 4, v0                 // the lane's input offset
  v_lshlrev_b32 v10, 2, v0                // its offset in a block
  global_load_dwordx4 v[2:5], v1, s[0:1]  // v2 = a, v3 = b, v4 = c, v5 = d
  s_waitcnt vmcnt(0)
  v_readfirstlane_b32 s4, v3              // s4: lane 0's b, an SGPR source as the library's code has
// Block 0: fma of three f32 operands.
  v_fma_mix_f32 v6, v2, v3, v4
  global_store_dword v10, v6, s[2:3]
// Block 1: a's low f16 half times b's high f16 half, plus c as an f32.
  v_fma_mix_f32 v6, v2, v3, v4 op_sel:[0,1,0] op_sel_hi:[1,1,0]
  global_store_dword v10, v6, s[2:3] offset:256
// Block 2: -(a's high f16 half) * |b (f32)| + -|c's low f16 half|.
  v_fma_mix_f32 v6, -v2, |v3|, -|v4| op_sel:[1,0,0] op_sel_hi:[1,0,1]
  global_store_dword v10, v6, s[2:3] offset:512
// Block 3: fma of three f32 operands rounded to f16 into d's low half (d's high half kept).
  v_mov_b32 v6, v5
  v_fma_mixlo_f16 v6, v2, v3, v4
  global_store_dword v10, v6, s[2:3] offset:768
// Block 4: f16 halves a.hi * b.hi + c.lo into d's low half.
  v_mov_b32 v6, v5
  v_fma_mixlo_f16 v6, v2, v3, v4 op_sel:[1,1,0] op_sel_hi:[1,1,1]
  global_store_dword v10, v6, s[2:3] offset:1024
// Block 5: -(a (f32)) * s4's low f16 half + |c's high f16 half| into d's high half.
  v_mov_b32 v6, v5
  v_fma_mixhi_f16 v6, -v2, s4, |v4| op_sel:[0,0,1] op_sel_hi:[0,1,1]
  global_store_dword v10, v6, s[2:3] offset:1280
// Block 6: packed f16 fma, each half of the result from the same halves of a, b, c.
  v_pk_fma_f16 v6, v2, v3, v4
  global_store_dword v10, v6, s[2:3] offset:1536
// Block 7: packed f16 fma with crossed halves and negations: low = fma(-a.hi, b.lo, c.hi),
// high = fma(a.lo, -b.hi, -c.lo).
  v_pk_fma_f16 v6, v2, v3, v4 op_sel:[1,0,1] op_sel_hi:[0,1,0] neg_lo:[1,0,0] neg_hi:[0,1,1]
  global_store_dword v10, v6, s[2:3] offset:1792
// Blocks 8 to 11: sin(2 pi a), cos(2 pi a), sin(2 pi -|b|), cos(2 pi b) (the last two in VOP3).
  v_sin_f32 v6, v2
  global_store_dword v10, v6, s[2:3] offset:2048
  v_cos_f32 v6, v2
  global_store_dword v10, v6, s[2:3] offset:2304
  v_sin_f32_e64 v6, -|v3|
  global_store_dword v10, v6, s[2:3] offset:2560
  v_cos_f32_e64 v6, v3
  global_store_dword v10, v6, s[2:3] offset:2816
  s_endpgm
