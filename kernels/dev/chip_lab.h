/* chip_lab.h — the lab copy of the on-chip layer wavefront with session 6's options (kernels/dev/chip_lab.cu;
 * kernels/dev/NOTES.md, "The on-chip wavefront, session 6"). Lab only: lab_lstm_wave variants 12-22. */
#ifndef RNNT_CHIP_LAB_H
#define RNNT_CHIP_LAB_H

#include "cu_wave.h"

/* EARLY_SCHED: the next step's schedule by an idle warp while the cells run (not by warp 1 after its cell);
 * SPLIT_PROJ: each projection pass on the step after its ring slots were read (chunk 0 whole), not all of a chunk on
 * the step before it starts; HOIST: every layer's h loads issued before the first product (registers); WSTAGE: each
 * warp loads its K slice of every layer's h in one round into its own shared buffer (one row only); WIDE_PASS:
 * projection passes of 16 columns (each W_ih fragment serves two n-tiles: half the W_ih bytes from L2). */
#define LAB_CHIP_EARLY_SCHED 1
#define LAB_CHIP_SPLIT_PROJ 2
#define LAB_CHIP_HOIST 4
#define LAB_CHIP_WSTAGE 8
#define LAB_CHIP_WIDE_PASS 16
#define LAB_CHIP_PROF_WORDS 10

typedef struct {
    int chunk, stagger, stage; /* as cu_lstm_wave_chip's */
    int opt;                   /* LAB_CHIP_* bits */
    unsigned *prof;            /* LAB_CHIP_PROF_WORDS words per (block, wavefront step < prof_steps): thread 0's clock at
                                * the step's top, after its products, after the block barrier, at its arrival, after the
                                * projections, after the spin; globaltimer after the arrival and after the spin; the
                                * projection passes of the step; the clock after red.release. 0: off (no clock reads) */
    int prof_steps;
} lab_chip_opts;

size_t lab_wave_chip_scratch_bytes(int n, int nb, int H, int hp, int chunk);
rnnt_status lab_wave_chip_ex(cudaStream_t stream, rnnt_lstm_act act, int nb, int n, const cu_wave_layer *layers,
                             const lab_chip_opts *o, void *scratch, size_t scratch_bytes, char *err, size_t errlen);

#endif
