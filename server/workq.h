/* workq.h — a small pool of threads running queued items in order, for CPU work that must not run on
 * the transport's loop threads (decoding audio bodies). An item is embedded in its owner; run() is
 * called on a pool thread exactly once per submitted item, and the pool never touches the item after.
 * Thread-safety: workq_submit from any thread; workq_free after the last submit, from one thread
 * (it runs what is queued, then joins). */
#ifndef SRV_WORKQ_H
#define SRV_WORKQ_H

typedef struct workq workq;
typedef struct workq_item {
    void (*run)(struct workq_item *it);
    struct workq_item *next; /* internal */
} workq_item;

/* 0, or -1 (no memory or no thread). */
int workq_create(int threads, workq **out);
void workq_submit(workq *q, workq_item *it);
/* Items queued and not yet started (for tests and metrics). */
int workq_pending(workq *q);
void workq_free(workq *q);

#endif
