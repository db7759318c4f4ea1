/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) for the C loops that check checksums
 * themselves: _pulsar_speedups.c (every entry's, inside its block walk) and _speedups.c (the
 * local ledger file's records); the crc32c package's C function cannot be called from C.
 * With SSE4.2 (checked once at run time) the crc32 instruction, three independent streams
 * (rounds of 3 x 4096 bytes, then of 3 x 512) joined by precomputed shifts; without it a
 * slicing-by-8 table. crc32c_update(crc, p, n, hw) takes and returns the finished value (as
 * the crc32c package's crc32c(data, crc)); hw = 0 forces the table. The tests compare both
 * paths with that package.
 */
#ifndef OFFLOADER_CRC32C_H
#define OFFLOADER_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CRC_POLY 0x82F63B78u
/* the three-stream path works on rounds of 3 x CRC_LANE bytes, then of 3 x CRC_LANE_SMALL */
#define CRC_LANE 4096
#define CRC_LANE_SMALL 512

static uint32_t crc_table[8][256];
/* crc_shift[s][k][b]: the register after CRC_LANE (s = 0) or CRC_LANE_SMALL (s = 1) zero
 * bytes from the register b << (8k) */
static uint32_t crc_shift[2][4][256];
static int crc_hw = 0;
/* crc_x2n[k] = x^(2^k) modulo the polynomial, bit-reflected (x^0 is bit 31) */
static uint32_t crc_x2n[67]; /* k < 67: a 64-bit byte length shifted by 3, no wrap-around */

static uint32_t crc_sw_raw(uint32_t crc, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) { crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= crc;
        crc = crc_table[7][w & 0xFF] ^ crc_table[6][(w >> 8) & 0xFF] ^
              crc_table[5][(w >> 16) & 0xFF] ^ crc_table[4][(w >> 24) & 0xFF] ^
              crc_table[3][(w >> 32) & 0xFF] ^ crc_table[2][(w >> 40) & 0xFF] ^
              crc_table[1][(w >> 48) & 0xFF] ^ crc_table[0][w >> 56];
        p += 8; n -= 8;
    }
    while (n--) crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

static uint32_t crc_shift_lane(int s, uint32_t crc) {
    return crc_shift[s][0][crc & 0xFF] ^ crc_shift[s][1][(crc >> 8) & 0xFF] ^
           crc_shift[s][2][(crc >> 16) & 0xFF] ^ crc_shift[s][3][crc >> 24];
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define CRC_HAVE_HW 1

/* one round of three streams of ``lane`` bytes from p (table s): the crc32 instruction's
 * latency is three times its throughput */
__attribute__((target("sse4.2"))) static inline uint32_t crc_hw_round(uint32_t crc, const unsigned char *p,
                                                                 size_t lane, int s) {
    uint64_t a = crc, b = 0, c = 0;
    for (size_t i = 0; i < lane; i += 8) {
        uint64_t wa, wb, wc;
        memcpy(&wa, p + i, 8);
        memcpy(&wb, p + lane + i, 8);
        memcpy(&wc, p + 2 * lane + i, 8);
        a = _mm_crc32_u64(a, wa);
        b = _mm_crc32_u64(b, wb);
        c = _mm_crc32_u64(c, wc);
    }
    return crc_shift_lane(s, crc_shift_lane(s, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw_raw(uint32_t crc, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) { crc = _mm_crc32_u8(crc, *p++); n--; }
    while (n >= 3 * CRC_LANE) { crc = crc_hw_round(crc, p, CRC_LANE, 0); p += 3 * CRC_LANE; n -= 3 * CRC_LANE; }
    while (n >= 3 * CRC_LANE_SMALL) {
        crc = crc_hw_round(crc, p, CRC_LANE_SMALL, 1);
        p += 3 * CRC_LANE_SMALL; n -= 3 * CRC_LANE_SMALL;
    }
    uint64_t c64 = crc;
    while (n >= 8) { uint64_t w; memcpy(&w, p, 8); c64 = _mm_crc32_u64(c64, w); p += 8; n -= 8; }
    crc = (uint32_t)c64;
    while (n--) crc = _mm_crc32_u8(crc, *p++);
    return crc;
}
#else
#define CRC_HAVE_HW 0
#endif

/* a * b modulo the polynomial (both reflected: x^0 is bit 31) */
static uint32_t crc_mulmod(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m) product ^= b;
        b = b & 1 ? (b >> 1) ^ CRC_POLY : b >> 1; /* b * x */
    }
    return product;
}

/* the tables, and whether the crc32 instruction is there; once, at module load */
static void crc32c_init(void) {
    uint32_t power = 1u << 30; /* x^1 */
    for (int k = 0; k < 67; k++) {
        crc_x2n[k] = power;
        power = crc_mulmod(power, power);
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ CRC_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = crc_table[0][crc_table[t - 1][i] & 0xFF] ^ (crc_table[t - 1][i] >> 8);
    /* the shift is linear: from the 32 one-bit registers, by the (slow, exact) table path */
    static const unsigned char zeros[CRC_LANE];
    const size_t lanes[2] = {CRC_LANE, CRC_LANE_SMALL};
    for (int s = 0; s < 2; s++) {
        uint32_t basis[32];
        for (int bit = 0; bit < 32; bit++) basis[bit] = crc_sw_raw((uint32_t)1 << bit, zeros, lanes[s]);
        for (int k = 0; k < 4; k++)
            for (int b = 0; b < 256; b++) {
                uint32_t v = 0;
                for (int bit = 0; bit < 8; bit++)
                    if (b & (1 << bit)) v ^= basis[8 * k + bit];
                crc_shift[s][k][b] = v;
            }
    }
#if CRC_HAVE_HW
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* ``crc`` the CRC32C of what came before (0 at the start); the CRC32C with p[0..n) added */
static uint32_t crc32c_update(uint32_t crc, const unsigned char *p, size_t n, int hw) {
    crc = ~crc;
#if CRC_HAVE_HW
    if (hw && crc_hw) return ~crc_hw_raw(crc, p, n);
#else
    (void)hw;
#endif
    return ~crc_sw_raw(crc, p, n);
}

/* the CRC32C of A + B from crc_a (of A), crc_b (of B) and the length of B */
__attribute__((unused)) static uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    if (len_b == 0) return crc_a; /* B is empty (as the pure twin: crc_b ignored) */
    uint32_t shift = 1u << 31; /* x^0 */
    for (int k = 3; len_b; len_b >>= 1, k++) /* x^(8 len_b) = product of x^(2^(k)) */
        if (len_b & 1) shift = crc_mulmod(crc_x2n[k], shift);
    return crc_mulmod(shift, crc_a) ^ crc_b;
}


#endif
