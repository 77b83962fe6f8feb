/* dtype.c — see dtype.h. */
#include "dtype.h"

#include <string.h>

float rnnt_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) bits = sign;
        else { /* subnormal: renormalise */
            int e = -1;
            do { e++; mant <<= 1; } while (!(mant & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | mant << 13;
    else bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float rnnt_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
