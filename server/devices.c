/* devices.c — the device slots and their failure rule (devices.h). */
#include "devices.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "srv.h"

int dev_resolve(const cfg *c, dev_slot *slots, int *n, char *err, size_t errlen)
{
    int cuda = c->backend == CFG_BACKEND_CUDA || (c->backend == CFG_BACKEND_AUTO && rnnt_cuda_available());
    int visible = cuda ? rnnt_cuda_device_count() : 0;
    int k = c->devices.n;
    if (k == 0) k = cuda && visible > 0 ? visible : 1;
    if (k > DEV_MAX) k = DEV_MAX;
    for (int d = 0; d < k; d++) {
        memset(&slots[d], 0, sizeof slots[d]);
        slots[d].ordinal = !cuda ? -1 : c->devices.n ? c->devices.v[d] : d;
        if (cuda && visible > 0 && slots[d].ordinal >= visible) {
            snprintf(err, errlen, "model.devices: CUDA device %d does not exist (%d visible)", slots[d].ordinal, visible);
            return -1;
        }
        atomic_init(&slots[d].mem_used, -1);
        atomic_init(&slots[d].mem_total, -1);
    }
    *n = k;
    return 0;
}

void dev_fail(srv *s, int d, const char *why)
{
    dev_slot *v = &s->devs[d];
    pthread_mutex_lock(&s->mu);
    snprintf(v->error, sizeof v->error, "%s", why);
    pthread_mutex_unlock(&s->mu);
    int was = atomic_exchange(&v->failed, 1);
    if (s->sched) sched_set_device_down(s->sched, d, 1);
    if (!was) {
        char q[300];
        log_quote(q, sizeof q, why);
        log_msg(LOG_ERROR, "msg=\"device out of rotation\" device=%d ordinal=%d devices_up=%d err=%s", d, v->ordinal,
                s->sched ? sched_devices_up(s->sched) : 0, q);
    }
}

void dev_restore(srv *s, int d)
{
    dev_slot *v = &s->devs[d];
    atomic_store(&v->streak, 0);
    if (s->sched) sched_set_device_down(s->sched, d, 0);
    if (atomic_exchange(&v->failed, 0)) {
        pthread_mutex_lock(&s->mu);
        v->error[0] = '\0';
        pthread_mutex_unlock(&s->mu);
        log_msg(LOG_INFO, "msg=\"device back in rotation\" device=%d ordinal=%d", d, v->ordinal);
    }
}

int dev_batch_done(srv *s, int d, rnnt_status st, const char *err)
{
    dev_slot *v = &s->devs[d];
    if (st != RNNT_ERR_DEVICE && st != RNNT_ERR_NOMEM) {
        atomic_store(&v->streak, 0);
        return 0;
    }
    atomic_fetch_add(&v->errors, 1);
    if (atomic_fetch_add(&v->streak, 1) + 1 >= DEV_FAIL_AFTER && !atomic_load(&v->failed)) {
        char why[256];
        snprintf(why, sizeof why, "%d batches in a row failed; the last: %.180s", DEV_FAIL_AFTER, err);
        dev_fail(s, d, why);
    }
    return 1;
}

void dev_sample_memory(srv *s, int d)
{
    dev_slot *v = &s->devs[d];
    size_t used = 0, total = 0;
    if (v->ordinal < 0 || rnnt_cuda_memory(v->ordinal, &used, &total)) return;
    atomic_store(&v->mem_used, (long long)used);
    atomic_store(&v->mem_total, (long long)total);
}

void dev_error(srv *s, int d, char *out, size_t n)
{
    pthread_mutex_lock(&s->mu);
    snprintf(out, n, "%s", s->devs[d].error);
    pthread_mutex_unlock(&s->mu);
}
